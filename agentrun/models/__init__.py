"""The shared models that cross the wire between the client, the workflows and the activities."""
