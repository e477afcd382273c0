// Kafka's Java consumer as a member of a consumer group that rebalances in a loop (the classic group protocol, as
// librdkafka and aiokafka members of the same group speak it):
// java -cp 'KAFKA/libs/*' RebalancingMember.java BOOTSTRAP GROUP CLIENT_ID TOPIC[,TOPIC...] [FLIP_TOPIC,...]
// With FLIP topics it changes its subscription each time it has been assigned, so the group rebalances again.
// Prints "assigned MEMBER_ID GENERATION" at each assignment and "lost MEMBER_ID" when the group dropped it (a
// missed heartbeat or rebalance: its partitions lost, not revoked); "closed" once it left the group. It runs until
// its standard input ends.
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class RebalancingMember {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("client.id", args[2]);
        props.put("group.protocol", "classic");
        props.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RoundRobinAssignor");
        props.put("enable.auto.commit", "false");
        props.put("session.timeout.ms", "6000");
        props.put("heartbeat.interval.ms", "500");
        props.put("max.poll.interval.ms", "6000");
        List<String> topics = Arrays.asList(args[3].split(","));
        List<String> flip = args.length > 4 ? Arrays.asList(args[4].split(",")) : null;
        AtomicBoolean stop = new AtomicBoolean();
        AtomicBoolean assigned = new AtomicBoolean();
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            Thread stdin = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) { }
                } catch (java.io.IOException ignored) {
                }
                stop.set(true);
                consumer.wakeup();
            });
            stdin.setDaemon(true);
            stdin.start();
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) { }

                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    System.out.println("assigned " + consumer.groupMetadata().memberId() + " "
                            + consumer.groupMetadata().generationId());
                    assigned.set(true);
                }

                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    System.out.println("lost " + consumer.groupMetadata().memberId());
                }
            };
            List<String> subscribed = topics;
            consumer.subscribe(subscribed, listener);
            while (!stop.get()) {
                try {
                    consumer.poll(Duration.ofMillis(20));
                } catch (org.apache.kafka.common.errors.WakeupException woken) {
                    break;
                }
                if (flip != null && assigned.getAndSet(false)) {
                    subscribed = subscribed == topics ? flip : topics;
                    consumer.subscribe(subscribed, listener);
                }
            }
        }
        System.out.println("closed");
    }
}
