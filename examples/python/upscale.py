"""A planrun job in Python (docs/job-protocol.md): doubles every pixel of a tiny picture."""
import json, os, sys

with open(os.environ["PLANRUN_INPUT_FILE"]) as f:
    job_input = json.load(f)
progress = os.fdopen(int(os.environ["PLANRUN_PROGRESS_FD"]), "w", buffering=1)

rows = job_input.get("rows")
if not isinstance(rows, list) or not all(isinstance(row, str) for row in rows):
    print("input.rows must be a list of strings", file=sys.stderr)
    sys.exit(65)  # EX_DATAERR: the input is wrong, trying again will not help

upscaled = []
for i, row in enumerate(rows):
    wide = "".join(pixel * 2 for pixel in row)
    upscaled += [wide, wide]
    print(f"progress {(i + 1) / len(rows):.2f} row {i + 1} of {len(rows)}", file=progress)

with open("upscaled.txt", "w") as f:  # the working directory is the job's scratch folder
    f.write("\n".join(upscaled) + "\n")
with open(os.environ["PLANRUN_RESULT_FILE"], "w") as f:
    json.dump({"data": {"width": len(upscaled[0]) if upscaled else 0, "height": len(upscaled)}, "outputs": ["upscaled.txt"]}, f)
