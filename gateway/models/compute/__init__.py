"""What the models cost and how they share the cores: compute meters, core use, the LLM's queue, decode capacity."""
