"""The shared models that cross the wire between the layers."""
