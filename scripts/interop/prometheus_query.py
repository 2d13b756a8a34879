"""Asks a Prometheus server's HTTP API an instant PromQL query until it answers with
the value expected, or the time runs out.

    prometheus_query.py BASE_URL QUERY EXPECTED [SECONDS]
      BASE_URL  the server, e.g. http://127.0.0.1:9090
      QUERY     a PromQL expression with one sample in its result (a sum(...), say)
      EXPECTED  the value wanted, as a number
      SECONDS   how long to keep asking (default 30): the scrapes come every second

Prints the last answer, `QUERY = VALUE`. Exit status 0 when the value was the one
expected, 1 otherwise.
"""

import json
import sys
import time
import urllib.parse
import urllib.request


def ask(base, query):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        return None, body
    result = body["data"]["result"]
    if len(result) != 1:
        return None, body
    return float(result[0]["value"][1]), body


def main():
    base, query, expected = sys.argv[1], sys.argv[2], float(sys.argv[3])
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0
    deadline = time.monotonic() + seconds
    value, body = None, None
    while True:
        try:
            value, body = ask(base, query)
        except OSError as e:
            value, body = None, str(e)
        if value == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print(f"{query} = {value} (expected {expected:g})")
    if value != expected:
        print(f"last answer: {body}")
        sys.exit(1)


if __name__ == "__main__":
    main()
