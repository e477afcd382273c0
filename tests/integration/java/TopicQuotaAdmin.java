// Kafka's Java admin client altering and describing a topic quota entity (entity type "topic") through the proxy:
// java -cp 'KAFKA/libs/*' TopicQuotaAdmin.java BOOTSTRAP TOPIC PRODUCER_BYTE_RATE
// Prints "described {...}" once the proxy describes the value it was given; exits 1 if it never does.
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

public class TopicQuotaAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        double rate = Double.parseDouble(args[2]);
        try (Admin admin = Admin.create(props)) {
            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of("topic", args[1]));
            ClientQuotaAlteration.Op op = new ClientQuotaAlteration.Op("producer_byte_rate", rate);
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(op)))).all().get();
            ClientQuotaFilter filter =
                ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity("topic", args[1])));
            for (int attempt = 0; attempt < 150; attempt++) { // in force within a read of the config topic
                Map<String, Double> found = admin.describeClientQuotas(filter).entities().get().get(entity);
                if (found != null && Double.valueOf(rate).equals(found.get("producer_byte_rate"))) {
                    System.out.println("described " + found);
                    return;
                }
                Thread.sleep(100);
            }
            System.out.println("not described");
            System.exit(1);
        }
    }
}
