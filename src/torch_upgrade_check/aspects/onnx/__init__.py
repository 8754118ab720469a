"""The onnx aspect: torch.onnx.export with the exporter the team calls, the file run in onnxruntime (run.py), judged
as the export aspects' programs are, and a changed default exporter said (judge.py)."""
