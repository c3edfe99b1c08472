"""Spec files: loading, dialects, the IR (Plan) and static checks. Pure: no I/O beyond reading specs."""
