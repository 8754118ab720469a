"""The export, jit and aoti aspects: the workload built as a team ships it, saved, loaded in a fresh process and run
(run.py), every program's outputs judged by the compile rule against eager's (judge.py, onnx's too)."""
