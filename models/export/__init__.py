"""Exporters: torch-free native ONNX export, optimum export (optional extra), int8 quantisation."""
