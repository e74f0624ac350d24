"""Model engines behind the small interfaces in ``base``; ``backends``: the one table of them per stage,
``loader``: loads the selected ones. Engine families live in sub-packages (``llama_cpp``, ``kokoro``,
``openai_http``); ``compute``: what the models cost and how they share the cores."""
