// Kafka's Java admin client altering and describing a topic quota entity (entity type "topic") through the proxy,
// and with a PARTITION a partition quota entity too (entity types "topic" and "partition", at half the rate):
// java -cp 'KAFKA/libs/*' TopicQuotaAdmin.java BOOTSTRAP TOPIC PRODUCER_BYTE_RATE [PARTITION]
// Prints "described {...}" for each once the proxy describes the value it was given; exits 1 if it never does.
import java.util.ArrayList;
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
            List<ClientQuotaEntity> entities = new ArrayList<>(List.of(new ClientQuotaEntity(Map.of("topic", args[1]))));
            List<Double> rates = new ArrayList<>(List.of(rate));
            List<ClientQuotaFilter> filters = new ArrayList<>(
                List.of(ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity("topic", args[1])))));
            if (args.length > 3) {
                entities.add(new ClientQuotaEntity(Map.of("topic", args[1], "partition", args[3])));
                rates.add(rate / 2);
                filters.add(ClientQuotaFilter.containsOnly(List.of(
                    ClientQuotaFilterComponent.ofEntity("topic", args[1]),
                    ClientQuotaFilterComponent.ofEntity("partition", args[3]))));
            }
            List<ClientQuotaAlteration> alterations = new ArrayList<>();
            for (int i = 0; i < entities.size(); i++) {
                ClientQuotaAlteration.Op op = new ClientQuotaAlteration.Op("producer_byte_rate", rates.get(i));
                alterations.add(new ClientQuotaAlteration(entities.get(i), List.of(op)));
            }
            admin.alterClientQuotas(alterations).all().get();
            for (int i = 0; i < entities.size(); i++) {
                if (!describedWithin(admin, filters.get(i), entities.get(i), rates.get(i))) {
                    System.out.println("not described " + entities.get(i));
                    System.exit(1);
                }
            }
        }
    }

    static boolean describedWithin(Admin admin, ClientQuotaFilter filter, ClientQuotaEntity entity, double rate)
            throws Exception {
        for (int attempt = 0; attempt < 150; attempt++) { // in force within a read of the config topic
            Map<String, Double> found = admin.describeClientQuotas(filter).entities().get().get(entity);
            if (found != null && Double.valueOf(rate).equals(found.get("producer_byte_rate"))) {
                System.out.println("described " + found);
                return true;
            }
            Thread.sleep(100);
        }
        return false;
    }
}
