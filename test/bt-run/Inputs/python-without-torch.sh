#!/bin/sh
# Stands in for a Python whose `import torch` fails: bench/bt_torch.py prints
# this line (and exits with status 3) in that case.
echo '{"unavailable": "no torch here"}'
exit 3
