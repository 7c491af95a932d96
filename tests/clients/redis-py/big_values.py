"""Large values through a real cluster with redis-py, as a new user would (issue 20): 20 SETs
and GETs in a row of each size (1 MiB and 16 MiB by default), each value read back whole, then
a small SET. Prints the slowest SET and GET of each size; exits 1 when a value reads back wrong
or a SET or GET took longer than --limit seconds (1 by default).

Usage: python big_values.py PORT [--count 20] [--sizes 1048576,16777216] [--limit 1.0]
"""

import argparse
import sys
import time

import redis


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--sizes", default=f"{1 << 20},{16 << 20}")
    parser.add_argument("--limit", type=float, default=1.0)
    args = parser.parse_args()
    client = redis.Redis(port=args.port, socket_timeout=60)
    failed = False
    for size in (int(s) for s in args.sizes.split(",")):
        value = bytes(i % 251 for i in range(size))
        slowest_set = slowest_get = 0.0
        for index in range(args.count):
            key = f"big-values-{size}-{index}"
            started = time.monotonic()
            client.set(key, value)
            written = time.monotonic()
            read = client.get(key)
            done = time.monotonic()
            if read != value:
                print(f"{size} bytes: value {index} reads back wrong", file=sys.stderr)
                failed = True
            slowest_set = max(slowest_set, written - started)
            slowest_get = max(slowest_get, done - written)
        over = max(slowest_set, slowest_get) > args.limit
        failed |= over
        verdict = f"over {args.limit} s" if over else "ok"
        print(f"{size:>9} bytes x {args.count}: slowest SET {slowest_set:.3f} s, slowest GET {slowest_get:.3f} s  {verdict}")
    started = time.monotonic()
    client.set("big-values-small", "1")
    print(f"a small SET afterwards: {1000 * (time.monotonic() - started):.1f} ms")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
