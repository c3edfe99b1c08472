"""Everything that touches the world: agent prompts, success checks, provider calls."""
