"""How an agent's reply is read: one module per protocol, chosen by a task's `protocol`.

`registry.PROTOCOLS` maps a protocol's name to the code that prompts and reads replies inside the
workflow; `prompts.FIRST_PROMPTS` maps it to the text of its first prompt, which inspect and
dry-run show. The `*_text` modules hold the prompts as pure text, so that those commands load
neither Temporal nor the run contract; this package itself imports nothing.
"""
