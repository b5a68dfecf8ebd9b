"""A model as models.yaml declares it (spec), its decoding (decoding), a reasoning model's thinking budget
(thinking), and the local quantization that makes its variants (quantize)."""
