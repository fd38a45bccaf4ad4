"""Confluent's own Protobuf and JSON Schema serializers and deserializers,
for the wire-format cross-check of issue 33 (cmd/pipeline/confluent_test.go).

  confluent_formats.py produce FORMAT BROKERS REGISTRY TOPIC FROM COUNT
      writes numbers FROM..FROM+COUNT-1, FORMAT protobuf or json_schema,
      with ProtobufSerializer (number n as crosscheck.proto's message
      n % 3: Number, Batch or Batch.Entry, from the classes protoc
      generated on PYTHONPATH) or JSONSerializer (crosscheck.json); each
      registers its schema under TOPIC-value.
  confluent_formats.py consume FORMAT BROKERS REGISTRY TOPIC EXPECTED
      reads TOPIC with read_committed until EXPECTED records arrived, with
      ProtobufDeserializer (as crosscheck.proto's Totals) or
      JSONDeserializer (validating against the writer's schema), and
      prints one JSON line per key: the last output's values and how many
      outputs.
  confluent_formats.py fixture
      prints, as JSON, the schema ProtobufSerializer registers for
      crosscheck.proto (on Confluent's mock registry) and records it
      writes, with unit costs at the edges of their byte encoding: the
      fixture of schema/protobuf_confluent_test.go.

Number n, keyed by its parity (so each parity's numbers are in order in
one partition): parity, amount 2^53 + n, ts BASE + n s + n * 1001 ns (JSON:
microseconds), bonus n when n % 5 == 0 (else not set; in JSON null when
n % 5 == 1, else absent), price n / 4, unit_cost (n - 1000) / 100 as a
confluent.type.Decimal of scale 2 + n % 3 (JSON: n - 1000, whole cents).
"""
import datetime
import decimal
import json
import os
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from confluent_read import last_per_key

BASE = 1767225600  # 2026-01-01T00:00:00Z
HERE = os.path.dirname(os.path.abspath(__file__))


def number(n):
    return {"n": n, "parity": "even" if n % 2 == 0 else "odd", "amount": (1 << 53) + n,
            "seconds": BASE + n, "nanos": n * 1001, "price": n / 4,
            "unit_cost": decimal.Decimal(n - 1000) / 100, "scale": 2 + n % 3}


def protobuf_classes():
    """crosscheck_pb2's Number, Batch and Batch.Entry. The generated code
    imports confluent/type/decimal.proto as the module confluent.type,
    which Confluent's client ships inside its own package."""
    from confluent_kafka.schema_registry import confluent
    from confluent_kafka.schema_registry.confluent import type as confluent_type
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2  # noqa: F401

    sys.modules.setdefault("confluent", confluent)
    sys.modules.setdefault("confluent.type", confluent_type)
    import crosscheck_pb2 as pb

    return pb, [pb.Number, pb.Batch, pb.Batch.Entry]


def protobuf_message(cls, v, cost=None):
    from confluent_kafka.schema_registry.common.protobuf import decimal_to_protobuf
    from google.protobuf.timestamp_pb2 import Timestamp
    from google.protobuf.wrappers_pb2 import Int64Value

    n = v["n"]
    m = cls(n=n, parity=v["parity"], amount=v["amount"], price=v["price"],
            ts=Timestamp(seconds=v["seconds"], nanos=v["nanos"]))
    if n % 5 == 0:
        m.bonus.CopyFrom(Int64Value(value=n))
    if cls.DESCRIPTOR.name != "Number":
        m.header.source = "confluent"
    if cost is None:
        cost = decimal_to_protobuf(v["unit_cost"], v["scale"])
    m.unit_cost.CopyFrom(cost)
    return m


def produce_protobuf(topic, sr, p, first, count):
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    _, classes = protobuf_classes()
    sers = [ProtobufSerializer(c, sr) for c in classes]
    ctx = SerializationContext(topic, MessageField.VALUE)
    for n in range(first, first + count):
        v = number(n)
        m = protobuf_message(classes[n % 3], v)
        p.produce(topic, key=v["parity"], value=sers[n % 3](m, ctx))
        p.poll(0)


def produce_json(topic, sr, p, first, count):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    with open(os.path.join(HERE, "crosscheck.json")) as f:
        ser = JSONSerializer(f.read(), sr)
    ctx = SerializationContext(topic, MessageField.VALUE)
    for n in range(first, first + count):
        v = number(n)
        ts = datetime.datetime.fromtimestamp(v["seconds"], tz=datetime.timezone.utc)
        ts += datetime.timedelta(microseconds=v["nanos"] // 1000)
        d = {"n": n, "parity": v["parity"], "amount": v["amount"], "ts": ts.isoformat(),
             "price": v["price"], "unit_cost": n - 1000}
        if n % 5 == 0:
            d["bonus"] = n
        elif n % 5 == 1:
            d["bonus"] = None
        p.produce(topic, key=v["parity"], value=ser(d, ctx))
        p.poll(0)


def produce(fmt, brokers, registry, topic, first, count):
    sr = SchemaRegistryClient({"url": registry})
    p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True, "linger.ms": 5})
    if fmt == "protobuf":
        produce_protobuf(topic, sr, p, first, count)
    else:
        produce_json(topic, sr, p, first, count)
    if p.flush(60) != 0:
        raise SystemExit("produce: records left unflushed")


def deserializer(fmt, sr):
    if fmt == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        pb, _ = protobuf_classes()
        de = ProtobufDeserializer(pb.Totals, {}, sr)

        def read(b, ctx):
            m = de(b, ctx)
            return {"key": m.key, "count": m.count, "sum": m.sum, "amount": m.amount, "bonus": m.bonus,
                    "price": m.price, "unit_cost": m.unit_cost,
                    "latest": {"seconds": m.latest.seconds, "nanos": m.latest.nanos}}
        return read
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    return JSONDeserializer(None, schema_registry_client=sr)


def consume(fmt, brokers, registry, topic, expected):
    read = deserializer(fmt, SchemaRegistryClient({"url": registry}))
    last, outputs = last_per_key(brokers, topic, expected, read)
    for key in sorted(last):
        print(json.dumps(dict(last[key], outputs=outputs[key])))


# Unit costs whose unscaled values sit at the edges of a byte of their
# two's-complement encoding, at scale 2.
EDGES = ["0.00", "0.01", "-0.01", "1.27", "1.28", "-1.28", "-1.29", "2.55", "2.56", "-2.56", "-2.57",
         "327.67", "327.68", "-327.68", "-327.69", "92233720368547758.07", "-92233720368547758.09",
         "123456789012345678901234567890.12"]


def fixture():
    from confluent_kafka.schema_registry.common.protobuf import decimal_to_protobuf
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    sr = SchemaRegistryClient.new_client({"url": "mock://fixture"})
    _, classes = protobuf_classes()
    sers = [ProtobufSerializer(c, sr) for c in classes]
    ctx = SerializationContext("numbers", MessageField.VALUE)
    records = []
    for n in (999, 1000, 1001, 1002, 1003, 1004, 1005):
        m = protobuf_message(classes[n % 3], number(n))
        records.append({"n": n, "hex": sers[n % 3](m, ctx).hex()})
    for i, cost in enumerate(EDGES):
        n = 3 * (i + 1)  # a Number
        m = protobuf_message(classes[0], number(n), decimal_to_protobuf(decimal.Decimal(cost), 2))
        records.append({"n": n, "unit_cost": cost, "hex": sers[0](m, ctx).hex()})
    schema = sr.get_latest_version("numbers-value").schema
    print(json.dumps({"schema": schema.schema_str, "records": records}, indent=1))


if __name__ == "__main__":
    if sys.argv[1:] == ["fixture"]:
        fixture()
        sys.exit(0)
    cmd, fmt, brokers, registry, topic = sys.argv[1:6]
    if fmt not in ("protobuf", "json_schema"):
        raise SystemExit("unknown format " + fmt)
    if cmd == "produce":
        produce(fmt, brokers, registry, topic, int(sys.argv[6]), int(sys.argv[7]))
    elif cmd == "consume":
        consume(fmt, brokers, registry, topic, int(sys.argv[6]))
    else:
        raise SystemExit("unknown command " + cmd)
