"""The tiering fixture itself, held to what Kafka uploads (``../shared/docs/tiered-storage.md`` §1.1): each remote
object of the Kafka layout is the broker's own file, byte for byte; a segment's producer snapshot is the broker's
snapshot at the next segment's base; its epoch blob is the text checkpoint of every epoch up to it. What the
broker's own ``server.log`` says was copied is what the layout holds."""

from __future__ import annotations

from pathlib import Path

from .tiered_broker import TieredRun, local_segments


def remote_files(run: TieredRun, partition: str) -> dict[int, dict[str, Path]]:
    """Base offset -> suffix -> file of one partition's segments in the Kafka layout."""
    assert run.remote_dir is not None
    topic, _, number = partition.rpartition("-")
    (tp_dir,) = (run.remote_dir / "kafka-tiered-storage").glob(f"{topic}-{number}-*")
    out: dict[int, dict[str, Path]] = {}
    for path in tp_dir.iterdir():
        offset, _, rest = path.name.partition("-")
        out.setdefault(int(offset), {})[rest.partition(".")[2]] = path
    return out


def test_every_tiered_object_is_the_brokers_own_file(tiered_kafka):
    run = tiered_kafka
    checked = 0
    for partition, copied in run.copied.items():
        remote = remote_files(run, partition)
        assert sorted(remote) == copied
        local = local_segments(run.before_local_delete, partition)
        closed = local[:-1]  # the last one was active (and preallocated) when the copy was taken
        assert set(closed) <= set(copied)
        for i, base in enumerate(closed):
            files = remote[base]
            local_dir = run.before_local_delete / partition
            for suffix in ("log", "index", "timeindex", "txnindex"):
                ours = local_dir / f"{base:020d}.{suffix}"
                assert (suffix in files) == ours.exists(), (partition, base, suffix)
                if ours.exists():
                    assert files[suffix].read_bytes() == ours.read_bytes(), (partition, base, suffix)
                    checked += 1
            following = local[i + 1]
            assert files["snapshot"].read_bytes() == (local_dir / f"{following:020d}.snapshot").read_bytes()
            epochs = files["leader_epoch_checkpoint"].read_text().splitlines()
            assert epochs[:2] == ["0", str(len(epochs) - 2)] and epochs[2:] == ["0 0"]
    assert checked >= 30
    assert {p.rpartition("-")[0] for p in run.copied} == {"plain", "zstd", "txn"}
