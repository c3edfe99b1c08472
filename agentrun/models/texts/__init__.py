"""The texts the engine sends agents and reads back (the protocols' prompts), shared by the workflow
that sends them and the views that show them."""
