"""The shared models: what crosses between the client, the workflows and the activities (the run
contract, activity inputs and outputs, statuses, the prompt texts). Below everything but `lang/`."""
