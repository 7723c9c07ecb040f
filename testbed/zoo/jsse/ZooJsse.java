// zoo-jsse: the testbed's Java (JSSE) host (issue 24). A stock com.sun.net.httpserver
// HttpsServer: the SSLContext gets only the key material, so sessions, tickets and their
// keys are JSSE's defaults (sun/security/ssl/SessionTicketExtension.java,
// SSLSessionContextImpl.java of the JDK that runs it; it prints java.version).
// Run from source (JDK >= 11): java ZooJsse.java KEYSTORE.p12 PASSWORD ADDRESS...
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.FileInputStream;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.security.KeyStore;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

public class ZooJsse {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: java ZooJsse.java KEYSTORE.p12 PASSWORD ADDRESS...");
            System.exit(2);
        }
        char[] pw = args[1].toCharArray();
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = new FileInputStream(args[0])) {
            ks.load(in, pw);
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, pw);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(kmf.getKeyManagers(), null, null);   // everything else: JSSE's defaults
        byte[] body = ("zoo-jsse " + System.getProperty("java.version") + "\n").getBytes();
        for (int i = 2; i < args.length; i++) {
            HttpsServer s = HttpsServer.create(new InetSocketAddress(InetAddress.getByName(args[i]), 443), 64);
            s.setHttpsConfigurator(new HttpsConfigurator(ctx));
            s.createContext("/", ex -> {
                ex.sendResponseHeaders(200, body.length);
                ex.getResponseBody().write(body);
                ex.close();
            });
            s.start();
        }
        System.out.println("zoo-jsse " + System.getProperty("java.version") + " listening");
    }
}
