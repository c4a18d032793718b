# Parquet I/O for `petal embed --input/--output` over pyarrow (docs/dependencies.md says why a
# Python front end). The `petal` binary embeds this file (dataset_arrow.h, generated) and runs it
# with the interpreter in $PETAL_PYTHON (default python3); nothing here is imported by anything
# else. Modes, all over binary little-endian frames on stdin/stdout:
#   read FILE TEXT ID START STOP N  -> frames of at most N rows of [START, STOP) on stdout
#   write DIM DTYPE                 -> a command loop on stdin: open the output / rows / close
# A read frame: u64 n; n bytes "id is null"; n bytes "text is null or missing"; then the ids and
# the texts, each as (n+1) i64 offsets, u64 length, bytes. n == 0 ends the stream.
import json
import os
import queue
import struct
import sys
import threading

try:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
except ImportError as e:
    sys.stderr.write(f"petal embed: Parquet needs pyarrow and numpy in {sys.executable} ({e}); "
                     "set PETAL_PYTHON to a Python that has them "
                     "(pip install -r scripts/requirements.txt)\n")
    sys.exit(2)


def die(msg):
    sys.stderr.write("petal embed: " + msg + "\n")
    sys.exit(2)


def strings(arr, n):
    """(null mask, int64 offsets from 0, data) of a string-castable arrow array of n rows.

    String columns are passed through without copying their bytes (a null row's bytes are never
    read: the reader reports the row)."""
    if arr is None:
        return np.ones(n, np.uint8), np.zeros(n + 1, np.int64), b""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.large_string())
    if arr.null_count:
        mask = arr.is_null().to_numpy(zero_copy_only=False).astype(np.uint8)
    else:
        mask = np.zeros(n, np.uint8)
    width = np.int32 if pa.types.is_string(arr.type) else np.int64
    offs = np.frombuffer(arr.buffers()[1], width)[arr.offset : arr.offset + n + 1].astype(np.int64)
    data = arr.buffers()[2]
    lo, hi = int(offs[0]), int(offs[-1])
    # A view of this batch's bytes only: the buffer may be a whole row group's.
    return mask, offs - lo, (memoryview(data)[lo:hi] if data is not None else b"")


def batches(f, cols, start, stop, batch_rows):
    """(first row, record batch) for rows [start, stop), decoded batch by batch (not a whole row
    group at once) on a thread of its own, a few batches ahead of the pipe writes."""
    md = f.metadata
    groups, first, pos = [], 0, None
    for g in range(md.num_row_groups):
        rows = md.row_group(g).num_rows
        if max(start, first) < min(stop, first + rows):
            groups.append(g)
            pos = first if pos is None else pos
        first += rows
    if not groups:
        return
    q = queue.Queue(maxsize=8)

    def produce():
        try:
            at = pos
            for b in f.iter_batches(batch_size=batch_rows, row_groups=groups, columns=cols,
                                    use_threads=True):
                lo, hi = max(start, at), min(stop, at + b.num_rows)
                if lo < hi:
                    q.put((lo, b.slice(lo - at, hi - lo)))
                at += b.num_rows
                if at >= stop:
                    break
            q.put(None)
        except BaseException as e:  # reported by the consumer
            q.put(e)

    threading.Thread(target=produce, daemon=True).start()
    while True:
        item = q.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def read(path, text_field, id_field, start, stop, batch_rows):
    out = sys.stdout.buffer
    f = pq.ParquetFile(path)
    names = f.schema_arrow.names
    if text_field not in names:
        die(f"{path}: no column '{text_field}' (--text-field); columns: {', '.join(names)}")
    if id_field and id_field not in names:
        die(f"{path}: no column '{id_field}' (--id-field); columns: {', '.join(names)}")
    cols = [text_field] + ([id_field] if id_field else [])
    for row0, b in batches(f, cols, start, stop, batch_rows):
        n = b.num_rows
        tm, to, td = strings(b.column(text_field), n)
        if id_field:
            im, io, idd = strings(b.column(id_field), n)
        else:  # the row number is the id
            ids = [str(row0 + i).encode() for i in range(n)]
            im = np.zeros(n, np.uint8)
            io = np.zeros(n + 1, np.int64)
            io[1:] = np.cumsum([len(x) for x in ids])
            idd = b"".join(ids)
        out.write(struct.pack("<Q", n) + im.tobytes() + tm.tobytes())
        for offs, data in ((io, idd), (to, td)):
            out.write(offs.astype("<i8").tobytes() + struct.pack("<Q", len(data)))
            out.write(data)
    out.write(struct.pack("<Q", 0))
    out.flush()


def exact(inp, n):
    b = inp.read(n)
    if len(b) != n:
        die("dataset writer: truncated command stream")
    return b


class Syncer:
    """fdatasync()s a file being written every quarter second on a thread of its own, so the
    final fsync has little left to do (the kernel would otherwise keep gigabytes dirty)."""

    def __init__(self, fd):
        self.fd, self.done = fd, threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done.wait(0.25):
            os.fdatasync(self.fd)

    def stop(self):
        self.done.set()
        self.thread.join()


def write(dim, dtype):
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    np_type = {"float32": np.float32, "float16": np.float16, "int8": np.int8}[dtype]
    arrow_type = {"float32": pa.float32(), "float16": pa.float16(), "int8": pa.int8()}[dtype]
    width = np.dtype(np_type).itemsize
    fields = [pa.field("id", pa.string()), pa.field("embedding", pa.list_(arrow_type, dim))]
    if dtype == "int8":
        fields.append(pa.field("scale", pa.float32()))
    # Row groups of about 32 MiB of embeddings: one write_batch per small batch would make a row
    # group each (slow to write and to read). No dictionary (ids are unique, vectors random) and
    # statistics for the id column only.
    group_rows = max(1024, (32 << 20) // (dim * width))
    writer, tmp, final, schema = None, None, None, None
    pending, pending_rows = [], 0

    def flush():
        nonlocal pending, pending_rows
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema=schema),
                               row_group_size=pending_rows)
        pending, pending_rows = [], 0

    while True:
        op = inp.read(1)
        if not op or op == b"Q":
            return
        if op == b"O":  # open the output: u32 len + JSON {path, final, metadata}
            (ln,) = struct.unpack("<I", exact(inp, 4))
            cmd = json.loads(exact(inp, ln))
            tmp, final = cmd["path"], cmd["final"]
            schema = pa.schema(fields, metadata={"petal": json.dumps(cmd["metadata"])})
            sink = pa.OSFile(tmp, "wb")
            writer = pq.ParquetWriter(sink, schema, compression="none", use_dictionary=False,
                                      write_statistics=["id"])
            syncer = Syncer(sink.fileno())
        elif op == b"R":  # rows: u64 n, ids (offsets, length, bytes), n*dim values, [n scales]
            (n,) = struct.unpack("<Q", exact(inp, 8))
            offs = np.frombuffer(exact(inp, 8 * (n + 1)), "<i8")
            (ln,) = struct.unpack("<Q", exact(inp, 8))
            ids = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offs.tobytes()),
                                                  pa.py_buffer(exact(inp, ln))).cast(pa.string())
            vals = np.frombuffer(exact(inp, n * dim * width), np_type)
            emb = pa.FixedSizeListArray.from_arrays(pa.array(vals, type=arrow_type), dim)
            arrays = [ids, emb]
            if dtype == "int8":
                arrays.append(pa.array(np.frombuffer(exact(inp, 4 * n), "<f4"), pa.float32()))
            pending.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
            pending_rows += n
            if pending_rows >= group_rows:
                flush()
        elif op == b"C":  # close: durable, renamed to its final name, then "ok"
            flush()
            writer.close()
            syncer.stop()
            os.fsync(sink.fileno())
            sink.close()
            os.replace(tmp, final)
            writer = None
            out.write(b"ok\n")
            out.flush()
        else:
            die("dataset writer: unknown command")


def main():
    mode = sys.argv[1]
    if mode == "read":
        read(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),
             int(sys.argv[7]))
    elif mode == "write":
        write(int(sys.argv[2]), sys.argv[3])
    else:
        die("unknown mode " + mode)


if __name__ == "__main__":
    try:
        main()
        # Everything is written and durable: skip the interpreter's teardown (pyarrow's takes
        # ~0.1 s, and `petal embed` waits for this process at its close).
        sys.stdout.flush()
        os._exit(0)
    except BrokenPipeError:
        sys.exit(1)
    except (OSError, pa.ArrowException) as e:
        die(str(e))
