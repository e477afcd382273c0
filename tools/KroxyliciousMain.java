import java.nio.file.Files;
import java.nio.file.Path;

import io.kroxylicious.proxy.KafkaProxy;
import io.kroxylicious.proxy.config.ConfigParser;
import io.kroxylicious.proxy.internal.config.Features;

/**
 * Kroxylicious's proxy started from its runtime jar (Maven Central serves kroxylicious-runtime, not the app):
 * the configuration file named by the only argument, the default features, running until the process is stopped.
 * Compiled by tools/fetch_kroxylicious.py; what bench/anchors_kroxylicious.py runs as the peer proxy.
 */
public final class KroxyliciousMain {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: KroxyliciousMain <proxy-config.yaml>");
            System.exit(2);
        }
        ConfigParser parser = new ConfigParser();
        String yaml = Files.readString(Path.of(args[0]));
        try (KafkaProxy proxy = new KafkaProxy(parser, parser.parseConfiguration(yaml), Features.defaultFeatures())) {
            proxy.startup();
            proxy.block();
        }
    }
}
