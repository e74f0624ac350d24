"""The llama.cpp engine (``llm_backend`` ``llama_cpp``): GGUF models in process, turns batched on one context."""
