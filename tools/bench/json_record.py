"""The JSON file a peers script records into: rewritten (atomically) after every section, so a
run cut short still leaves what it measured."""
import json
import os


class JsonRecord:
    def __init__(self, path, data):
        self.path = path
        self.data = data

    def save(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)
