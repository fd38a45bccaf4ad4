"""Confluent's own Avro serializer and deserializer, for the wire-format
cross-check of issue 33 (cmd/pipeline/confluent_test.go).

  confluent_avro.py produce BROKERS REGISTRY TOPIC FROM COUNT VERSION
      writes numbers FROM..FROM+COUNT-1 as datagen's Number record (n cents
      as a decimal amount), schema VERSION 1 or 2, with AvroSerializer
      (which registers the schema under TOPIC-value).
  confluent_avro.py consume BROKERS REGISTRY TOPIC EXPECTED
      reads TOPIC with read_committed until EXPECTED records arrived, with
      AvroDeserializer, and prints one JSON line per key: the last output's
      count, sum and amount (a decimal, as text), and how many outputs.
"""
import datetime
import decimal
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from confluent_read import last_per_key

V1 = """{"type":"record","name":"Number","namespace":"eoflow.datagen","fields":[
 {"name":"n","type":"long"},{"name":"parity","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}"""
V2 = """{"type":"record","name":"Number","namespace":"eoflow.datagen","fields":[
 {"name":"n","type":"long"},{"name":"parity","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"note","type":"string","default":""}]}"""


def produce(brokers, registry, topic, first, count, version):
    sr = SchemaRegistryClient({"url": registry})
    ser = AvroSerializer(sr, V2 if version == 2 else V1)
    p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True, "linger.ms": 5})
    ctx = SerializationContext(topic, MessageField.VALUE)
    now = datetime.datetime.now(tz=datetime.timezone.utc)
    for n in range(first, first + count):
        v = {"n": n, "parity": "even" if n % 2 == 0 else "odd",
             "amount": decimal.Decimal(n) / 100, "ts": now}
        if version == 2:
            v["note"] = "confluent"
        p.produce(topic, value=ser(v, ctx))
        p.poll(0)
    if p.flush(60) != 0:
        raise SystemExit("produce: records left unflushed")


def consume(brokers, registry, topic, expected):
    de = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    last, outputs = last_per_key(brokers, topic, expected, de)
    for key in sorted(last):
        v = last[key]
        print(json.dumps({"key": key, "count": v["count"], "sum": v["sum"],
                          "amount": str(v["amount"]), "outputs": outputs[key]}))


if __name__ == "__main__":
    cmd, brokers, registry, topic = sys.argv[1:5]
    if cmd == "produce":
        produce(brokers, registry, topic, int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]))
    elif cmd == "consume":
        consume(brokers, registry, topic, int(sys.argv[5]))
    else:
        raise SystemExit("unknown command " + cmd)
