"""Run on the edge node by test_network_faults.py's DataNode row: ``write PATH SIZE`` writes
SIZE random bytes to PATH with sparktf.fs and prints their SHA-256; ``read PATH N`` reads PATH
back N times with sparktf.fs (the backend SPARKTF_HDFS_BACKEND names: the NameNode picks a
replica at random for each) and prints each read's SHA-256, the longest read's seconds, and
how many reads met the silent DataNode first (sparktf's warning)."""

import hashlib
import logging
import os
import sys
import time

import sparktf.fs as fs

if __name__ == "__main__":
    verb, path = sys.argv[1], sys.argv[2]
    if verb == "write":
        data = os.urandom(int(sys.argv[3]))
        fs.write_bytes(path, data)
        print("SHA=" + hashlib.sha256(data).hexdigest())
    else:
        met = []
        handler = logging.Handler()
        handler.emit = lambda record: met.append(record.getMessage())
        logging.getLogger("sparktf.fs").addHandler(handler)
        shas, longest = set(), 0.0
        for _ in range(int(sys.argv[3])):
            start = time.monotonic()
            shas.add(hashlib.sha256(fs.read_bytes(path)).hexdigest())
            longest = max(longest, time.monotonic() - start)
        print("SHA=" + ",".join(sorted(shas)))
        print(f"SECS={longest:.2f}")
        print(f"MET={sum('did not answer' in m for m in met)}")
