"""Topic and ACL setup for the test broker of hack/kafka, through confluent-kafka (librdkafka):
a real client nobody here wrote, so the tests' view of the broker does not depend on semops'
own Kafka client.

    kafka-admin.py BOOTSTRAP ping
    kafka-admin.py BOOTSTRAP create NAME...      prints NAME <topic id> per topic
    kafka-admin.py BOOTSTRAP delete NAME...
    kafka-admin.py BOOTSTRAP describe NAME...    prints NAME <topic id>, or NAME absent
    kafka-admin.py BOOTSTRAP allow-describe PRINCIPAL...
"""
import sys
import time

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

TIMEOUT = 30


def topic_ids(admin, names):
    out = {}
    for name in names:
        try:
            d = admin.describe_topics(TopicCollection([name]), request_timeout=TIMEOUT)[name].result()
            # librdkafka prints standard base64; Kafka's own tools the URL-safe form.
            out[name] = str(d.topic_id).replace("+", "-").replace("/", "_").rstrip("=")
        except KafkaException as e:
            if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
            out[name] = "absent"
    return out


def main(bootstrap, command, *args):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if command == "ping":
        admin.list_topics(timeout=5)
    elif command == "create":
        futures = admin.create_topics([NewTopic(n, 1, 1) for n in args], request_timeout=TIMEOUT)
        for f in futures.values():
            f.result()
        # A created topic reaches the brokers' metadata a moment after the controller commits it.
        deadline = time.monotonic() + TIMEOUT
        ids = topic_ids(admin, args)
        while "absent" in ids.values() and time.monotonic() < deadline:
            time.sleep(0.1)
            ids = topic_ids(admin, args)
        for name, topic_id in ids.items():
            print(name, topic_id)
    elif command == "delete":
        for f in admin.delete_topics(list(args), request_timeout=TIMEOUT).values():
            f.result()
    elif command == "describe":
        for name, topic_id in topic_ids(admin, args).items():
            print(name, topic_id)
    elif command == "allow-describe":
        bindings = [AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, p, "*",
                               AclOperation.DESCRIBE, AclPermissionType.ALLOW) for p in args]
        for f in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
            f.result()
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(*sys.argv[1:])
