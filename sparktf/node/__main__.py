"""``python -m sparktf.node PARENT_PID``: see :mod:`sparktf.node.process`."""

from sparktf.node.process import main

main()
