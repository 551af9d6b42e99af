#!/bin/sh
# A planrun job in shell (docs/job-protocol.md): counts the words of input.text.
# The input is on stdin too; this job reads it from the file. Outputs go to outputs/.
set -eu
text=$(sed -n 's/.*"text": *"\([^"]*\)".*/\1/p' "$PLANRUN_INPUT_FILE")
if [ -z "$text" ]; then
  echo "input.text must be a non-empty string" >&2
  exit 65 # EX_DATAERR
fi
echo "progress 0.5 counting" >&"$PLANRUN_PROGRESS_FD"
mkdir -p outputs
echo "$text" | wc -w | tr -d ' ' > outputs/count.txt
echo "progress 1 done" >&"$PLANRUN_PROGRESS_FD"
