"""Compares two runs of redis-py's own test suite, one against redis-server and one against
ordo's gateway (pytest --junitxml reports), over the command families issue 23 names.

A test of test_commands.py is in scope when the command its name starts with (test_zadd_nx ->
zadd) is one of FAMILIES; every test of test_pipeline.py (pipelines and MULTI/EXEC) and of
test_connection.py (HELLO, AUTH, RESP3 parsing, connections) is in scope. The figure is the
share of in-scope tests passing against redis-server that also pass against ordo. Prints the
table per family and every in-scope test that passes against redis-server but not against ordo;
exits 1 when the share is below --minimum.
"""

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict

FAMILIES = {
    "strings": "get set setnx setex psetex getset getdel getex strlen append incr incrby incrbyfloat decr decrby "
    "mget mset msetnx getrange setrange substr",
    "hashes": "hset hget hgetall hdel hincrby hincrbyfloat hexists hlen hkeys hvals hmget hmset hsetnx hstrlen",
    "lists": "lpush rpush lpop rpop lrange llen lindex lset lrem ltrim lpushx rpushx linsert lpos",
    "sets": "sadd srem smembers sismember smismember scard spop srandmember sinter sunion sdiff sinterstore "
    "sunionstore sdiffstore smove",
    "sorted sets": "zadd zrem zrange zrangebyscore zrevrangebyscore zrevrange zscore zmscore zincrby zcard zrank "
    "zrevrank zcount zpopmin zpopmax zremrangebyscore zremrangebyrank",
    "keys": "del unlink exists type rename renamenx keys scan dbsize flushdb flushall randomkey",
    "expiry": "expire pexpire expireat pexpireat ttl pttl expiretime pexpiretime persist",
    "server": "time client config info ping echo hello auth command select",
    "transactions": "multi exec discard watch unwatch",
}
FAMILY_OF = {command: family for family, commands in FAMILIES.items() for command in commands.split()}


def outcomes(path):
    """{test id: None if it passed, else why it failed} of a junit report (a skipped test is
    absent)."""
    result = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        test = f"{case.get('classname')}::{case.get('name')}"
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        result[test] = None if failed is None else (failed.get("message") or "failed").splitlines()[0][:160]
    return result


def family(test):
    module, _, name = test.partition("::")
    if "test_pipeline" in module:
        return "transactions"
    if "test_connection" in module:
        return "connection"
    name = name.split("[")[0].removeprefix("test_")
    words = name.split("_")
    for length in (2, 1):  # test_client_list -> "client list" is not a command; "client" is
        command = "".join(words[:length])
        if command in FAMILY_OF:
            return FAMILY_OF[command]
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("redis_server")
    parser.add_argument("ordo")
    parser.add_argument("--minimum", type=float, default=0.9)
    arguments = parser.parse_args()
    reference, ordo = outcomes(arguments.redis_server), outcomes(arguments.ordo)
    counted, passed, missing = defaultdict(int), defaultdict(int), []
    for test, failure in sorted(reference.items()):
        kind = family(test)
        if failure is not None or kind is None:
            continue
        counted[kind] += 1
        why = ordo.get(test, "not run")
        if why is None:
            passed[kind] += 1
        else:
            missing.append((kind, test, why))
    print(f"{'family':<14} {'pass vs redis-server':>20} {'pass vs ordo':>13} {'share':>7}")
    for kind in sorted(counted):
        print(f"{kind:<14} {counted[kind]:>20} {passed[kind]:>13} {passed[kind] / counted[kind]:>7.1%}")
    total, total_passed = sum(counted.values()), sum(passed.values())
    share = total_passed / total if total else 0.0
    print(f"{'all in scope':<14} {total:>20} {total_passed:>13} {share:>7.1%}")
    for kind, test, why in missing:
        print(f"  not passing against ordo ({kind}): {test.rpartition('.')[2]}: {why}")
    sys.exit(0 if share >= arguments.minimum else 1)


if __name__ == "__main__":
    main()
