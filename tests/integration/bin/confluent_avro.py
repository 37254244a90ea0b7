#!/usr/bin/python3
# Apache Avro's own Python implementation (Debian's python3-avro), writing
# and reading the Confluent wire format: the independent side of the
# schema_* tests. Debian's Python packages load only in Debian's own
# interpreter, hence /usr/bin/python3 (not the first python3 on PATH).
#
#   confluent_avro.py encode SCHEMA.avsc ID DATA.py
#       DATA.py sets `records`, a list of Python datums (datetime, Decimal,
#       date, bytes ... as python3-avro takes them); prints one kproduce
#       envelope per datum: {"key":"k<i>","value_base64":"<framed bytes>"}
#   confluent_avro.py decode SCHEMA.avsc
#       reads kconsume envelopes written with --value-format bytes; prints
#       each value as the plain JSON kpipe(7) promises (SCHEMA REGISTRY),
#       keys sorted, with its schema id: {"id":N,"value":...}
#   confluent_avro.py plain
#       reads JSON lines, prints them with keys sorted (for comparison)
import base64
import datetime
import decimal
import io
import json
import math
import struct
import sys
import uuid

import avro.io
import avro.schema


def load_schema(path):
    with open(path) as f:
        return avro.schema.parse(f.read())


def encode(schema_path, schema_id, data_path):
    schema = load_schema(schema_path)
    scope = {"datetime": datetime, "decimal": decimal, "uuid": uuid}
    with open(data_path) as f:
        exec(f.read(), scope)
    writer = avro.io.DatumWriter(schema)
    for i, datum in enumerate(scope["records"]):
        buf = io.BytesIO()
        buf.write(b"\0" + struct.pack(">I", int(schema_id)))
        writer.write(datum, avro.io.BinaryEncoder(buf))
        framed = base64.b64encode(buf.getvalue()).decode()
        print(json.dumps({"key": "k%d" % i, "value_base64": framed}))


def plain(v):
    """A python3-avro datum as kpipe's plain JSON."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        digits = 6 if v.microsecond % 1000 else 3
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + ("%06d" % v.microsecond)[:digits] + "Z"
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def decode(schema_path):
    schema = load_schema(schema_path)
    reader = avro.io.DatumReader(schema)
    for line in sys.stdin:
        env = json.loads(line)
        raw = base64.b64decode(env["value_base64"])
        assert raw[0] == 0, "magic byte %d" % raw[0]
        (schema_id,) = struct.unpack(">I", raw[1:5])
        stream = io.BytesIO(raw[5:])
        datum = reader.read(avro.io.BinaryDecoder(stream))
        assert stream.read() == b"", "bytes left after the value"
        print(json.dumps({"id": schema_id, "value": plain(datum)}, sort_keys=True))


def main():
    cmd = sys.argv[1]
    if cmd == "encode":
        encode(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "decode":
        decode(sys.argv[2])
    elif cmd == "plain":
        for line in sys.stdin:
            print(json.dumps(json.loads(line), sort_keys=True))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
