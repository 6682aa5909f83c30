"""What all three sides share: roles, cluster spec and TF_CONFIG (:mod:`.topology`), the specs
that cross a process boundary (:mod:`.spec`), the control channel (:mod:`.protocol`) and its
messages (:mod:`.messages`), the feed's frames (:mod:`.feedwire`), port reservation
(:mod:`.ports`) and process lifetime (:mod:`.procs`).

Runs on every side. Imports the standard library (and psutil) only: never pyspark, never
tensorflow (``tests/unit/test_preflight.py::test_layering`` checks).
"""
