"""The producers writing when the broker is killed (a script, started as its own process and killed by its PID):
``python live_writer.py BOOTSTRAP``.

One thread writes ``live-plain`` (no idempotence, acks=1) and ``live-idem`` (idempotent, zstd) without pause,
printing ``sent N`` every 500 records; the main thread runs transactions on ``live-txn`` (transactional id
``live-writer``, every fourth aborted), then begins one more, writes into it, flushes and prints ``OPEN``: the
transaction is left open at the crash, and the plain writes go on until the process is killed."""

from __future__ import annotations

import random
import sys
import threading
import time

from kafka import KafkaProducer


def main(bootstrap: str) -> None:
    common = dict(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=30000)
    plain = KafkaProducer(enable_idempotence=False, acks=1, **common)
    idem = KafkaProducer(enable_idempotence=True, acks="all", compression_type="zstd", **common)
    txn = KafkaProducer(transactional_id="live-writer", transaction_timeout_ms=900000, **common)
    rng = random.Random(11)

    def keep_writing() -> None:
        n = 0
        while True:
            value = rng.randbytes(150).hex().encode()
            key = f"key-{n % 300}".encode()
            plain.send("live-plain", value=value, key=key, partition=n % 2)
            idem.send("live-idem", value=value, key=key, partition=n % 2)
            n += 1
            if n % 500 == 0:
                print(f"sent {n}", flush=True)
                time.sleep(0.01)

    threading.Thread(target=keep_writing, daemon=True).start()
    txn.init_transactions()
    for i in range(20):
        txn.begin_transaction()
        for j in range(50):
            for p in (0, 1):
                txn.send("live-txn", value=b"txn-%d-%d" % (i, j), key=b"k%d" % j, partition=p)
        if i % 4 == 3:
            txn.abort_transaction()
        else:
            txn.commit_transaction()
    txn.begin_transaction()
    for j in range(30):
        for p in (0, 1):
            txn.send("live-txn", value=b"open-%d" % j, key=b"k%d" % j, partition=p)
    txn.flush()
    print("OPEN", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1])
