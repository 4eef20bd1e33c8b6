#!/usr/bin/env python3
"""A small S3 client for the tests, on boto3 (a client nobody here wrote), so
that what tierfs stores can be checked, changed and prepared from outside.

Usage: s3ctl.py COMMAND ARGS...   (endpoint from $S3_ENDPOINT, credentials
from $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY, region $S3_REGION)
  wait [BUCKET]         until the server answers (30 s, or until process
                        $S3_WAIT_PID ends), then make BUCKET
  mkbucket BUCKET       make a bucket (no error if it is there)
  ls BUCKET [PREFIX]    one line per object: "SIZE KEY", sorted by key
  get BUCKET KEY        the object's bytes on stdout
  put BUCKET KEY FILE   store FILE's bytes (- for stdin) as KEY
  putmany BUCKET FILE KEY...  store FILE's bytes under each KEY
  rm BUCKET KEY         delete KEY
Exit status 0, or 1 with the error on stderr.
"""
import os
import sys
import time

import boto3
from botocore.config import Config


def client(retries=0, timeout=10):
    return boto3.client(
        "s3",
        endpoint_url=os.environ["S3_ENDPOINT"],
        region_name=os.environ.get("S3_REGION", "us-east-1"),
        config=Config(retries={"max_attempts": retries, "mode": "standard"},
                      connect_timeout=timeout, read_timeout=timeout,
                      s3={"addressing_style": "path"}))


def cmd_wait(args):
    c = client(timeout=2)
    t_end = time.time() + float(os.environ.get("S3_WAIT_SECS", "30"))
    err = None
    pid = int(os.environ.get("S3_WAIT_PID", "0"))
    while time.time() < t_end:
        if pid:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print("s3ctl: the server (pid %d) exited" % pid, file=sys.stderr)
                return 1
        try:
            c.list_buckets()
            break
        except Exception as e:  # not up yet: refused, 503, auth store not loaded
            err = e
            time.sleep(0.1)
    else:
        print("s3ctl: server at %s did not answer: %s" % (os.environ["S3_ENDPOINT"], err), file=sys.stderr)
        return 1
    if args:
        return cmd_mkbucket(args)
    return 0


def cmd_mkbucket(args):
    c = client(retries=3)
    try:
        c.create_bucket(Bucket=args[0])
    except c.exceptions.BucketAlreadyOwnedByYou:
        pass
    except c.exceptions.BucketAlreadyExists:
        pass
    return 0


def cmd_ls(args):
    c = client(retries=3)
    kw = {"Bucket": args[0], "Prefix": args[1] if len(args) > 1 else ""}
    out = []
    for page in c.get_paginator("list_objects_v2").paginate(**kw):
        for o in page.get("Contents", []):
            out.append((o["Key"], o["Size"]))
    for k, s in sorted(out):
        print("%d %s" % (s, k))
    return 0


def cmd_get(args):
    body = client(retries=3).get_object(Bucket=args[0], Key=args[1])["Body"].read()
    sys.stdout.buffer.write(body)
    return 0


def cmd_put(args):
    data = sys.stdin.buffer.read() if args[2] == "-" else open(args[2], "rb").read()
    client(retries=3).put_object(Bucket=args[0], Key=args[1], Body=data)
    return 0


def cmd_putmany(args):
    data = open(args[1], "rb").read()
    c = client(retries=3)
    for k in args[2:]:
        c.put_object(Bucket=args[0], Key=k, Body=data)
    return 0


def cmd_rm(args):
    client(retries=3).delete_object(Bucket=args[0], Key=args[1])
    return 0


def main():
    cmds = {"wait": cmd_wait, "mkbucket": cmd_mkbucket, "ls": cmd_ls, "get": cmd_get,
            "put": cmd_put, "putmany": cmd_putmany, "rm": cmd_rm}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return cmds[sys.argv[1]](sys.argv[2:])
    except Exception as e:
        print("s3ctl %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
