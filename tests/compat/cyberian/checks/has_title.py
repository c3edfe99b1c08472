import os

result = os.path.exists("report.md") and open("report.md").read().startswith("# ")
