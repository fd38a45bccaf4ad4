"""The read loop both Confluent cross-checks share (confluent_avro.py,
confluent_formats.py): a read_committed consumer of Confluent's client."""
import datetime

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.serialization import MessageField, SerializationContext


def last_per_key(brokers, topic, expected, decode):
    """Reads topic until expected records arrived (at most 120 s), each
    value decoded by decode(bytes, SerializationContext), and returns the
    last value of each key and how many values each key had. A record's
    key must be its value's "key" field."""
    c = Consumer({"bootstrap.servers": brokers, "group.id": "confluent-check-" + topic,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    last, outputs, seen = {}, {}, 0
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=120)
    while seen < expected:
        if datetime.datetime.now() > deadline:
            raise SystemExit("consume: %d of %d records" % (seen, expected))
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            raise KafkaException(m.error())
        v = decode(m.value(), SerializationContext(topic, MessageField.VALUE))
        seen += 1
        key = v["key"]
        if m.key().decode() != key:
            raise SystemExit("record key %r, value key %r" % (m.key(), key))
        last[key] = v
        outputs[key] = outputs.get(key, 0) + 1
    c.close()
    return last, outputs
