"""Confluent's own Avro serializer writing a table, for the Avro table
cross-check (cmd/pipeline/confluent_test.go).

  confluent_table.py produce BROKERS REGISTRY TOPIC
      writes the customers of the test to TOPIC, keys as Avro strings
      (registered under TOPIC-key), values as Customer records in two
      schema versions (TOPIC-value; version 2 adds region with a default):
        c1 gold 0.10 (v1), c2 silver 0.05 (v1), c3 bronze 0.00 (v2),
        c4 gold 0.50 (v1) then a tombstone, c2 gold 0.20 (v2),
      and two values that do not decode: c8's is not in the wire format,
      c9's names a schema id the registry does not have.
"""
import decimal
import struct
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

V1 = """{"type":"record","name":"Customer","namespace":"eoflow.test","fields":[
 {"name":"tier","type":"string"},
 {"name":"discount","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}}]}"""
V2 = """{"type":"record","name":"Customer","namespace":"eoflow.test","fields":[
 {"name":"tier","type":"string"},
 {"name":"discount","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}},
 {"name":"region","type":"string","default":""}]}"""


def produce(brokers, registry, topic):
    sr = SchemaRegistryClient({"url": registry})
    key = AvroSerializer(sr, '"string"')
    v1, v2 = AvroSerializer(sr, V1), AvroSerializer(sr, V2)
    kctx = SerializationContext(topic, MessageField.KEY)
    vctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True})

    def put(k, value):
        p.produce(topic, key=key(k, kctx), value=value)

    def customer(ser, tier, discount, **more):
        return ser(dict(tier=tier, discount=decimal.Decimal(discount), **more), vctx)

    put("c1", customer(v1, "gold", "0.10"))
    put("c2", customer(v1, "silver", "0.05"))
    put("c3", customer(v2, "bronze", "0.00", region="eu"))
    put("c4", customer(v1, "gold", "0.50"))
    put("c4", None)
    put("c2", customer(v2, "gold", "0.20", region="us"))
    put("c8", b"not avro")
    put("c9", b"\x00" + struct.pack(">I", 99999) + b"\x02")
    if p.flush(60) != 0:
        raise SystemExit("produce: records left unflushed")


if __name__ == "__main__":
    cmd, brokers, registry, topic = sys.argv[1:5]
    if cmd != "produce":
        raise SystemExit("unknown command " + cmd)
    produce(brokers, registry, topic)
