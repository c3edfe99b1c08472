"""`client ui`: the web page people answer runs on (the inbox) and follow them on."""
