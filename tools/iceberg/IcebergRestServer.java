// The Apache Iceberg REST catalog for semops's tests: Iceberg's own RESTCatalogAdapter and
// RESTCatalogServlet (iceberg-core's test artifact) over a JdbcCatalog on SQLite with a local
// warehouse, served by Jetty on 127.0.0.1 only (the stock RESTCatalogServer binds every
// interface). In front of the catalog, a filter that makes the server behave like a secured
// production catalog, so the client's auth paths are exercised for real:
//   ICEBERG_CLIENTS     "id:secret,..."  OAuth2 client credentials accepted at /v1/oauth/tokens
//   ICEBERG_TOKEN_TTL   seconds a token issued there stays valid (expired tokens: 401)
//   ICEBERG_STATIC_TOKEN a bearer token that is always valid (the bearer-token mode)
//   ICEBERG_FORBIDDEN   "ns.name,..."   tables and views answered 403 (a grant the client lacks)
//   ICEBERG_FAIL_FILE   a file: while it exists, every catalog request answers 503
//   ICEBERG_TLS_KEYSTORE, ICEBERG_TLS_PASSWORD, ICEBERG_TLS_PORT   a PKCS#12 key store: also
//                       serve HTTPS on 127.0.0.1 (port 0: any)
//   ICEBERG_EXTRA_HOST  one more address to serve HTTPS on (the local node's, for Pods)
// Without ICEBERG_CLIENTS and ICEBERG_STATIC_TOKEN, requests need no token.
// Every token issued is counted, and every request refused for an expired token: GET
// /test/tokens-issued and /test/expired-refusals answer the counts (test harness only).
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class IcebergRestServer {
  private static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }

  private static Set<String> list(String value) {
    Set<String> out = new HashSet<>();
    for (String s : value.split(",")) {
      if (!s.isBlank()) out.add(s.trim());
    }
    return out;
  }

  /** Auth and failure injection in front of the catalog servlet. */
  static final class Guard implements Filter {
    private final Map<String, String> clients = new HashMap<>();
    private final String staticToken = env("ICEBERG_STATIC_TOKEN", "");
    private final long ttlSeconds = Long.parseLong(env("ICEBERG_TOKEN_TTL", "3600"));
    private final Set<String> forbidden = list(env("ICEBERG_FORBIDDEN", ""));
    private final String failFile = env("ICEBERG_FAIL_FILE", "");
    private final Map<String, Long> tokens = new ConcurrentHashMap<>();
    private final AtomicLong issued = new AtomicLong();
    private final AtomicLong expiredRefusals = new AtomicLong();
    private final SecureRandom random = new SecureRandom();

    Guard() {
      for (String pair : list(env("ICEBERG_CLIENTS", ""))) {
        int colon = pair.indexOf(':');
        clients.put(pair.substring(0, colon), pair.substring(colon + 1));
      }
    }

    private boolean secured() {
      return !clients.isEmpty() || !staticToken.isEmpty();
    }

    private static void answer(HttpServletResponse res, int status, String type, String message)
        throws IOException {
      res.setStatus(status);
      res.setContentType("application/json");
      res.getWriter()
          .write(
              "{\"error\":{\"message\":\""
                  + message
                  + "\",\"type\":\""
                  + type
                  + "\",\"code\":"
                  + status
                  + "}}");
    }

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
        throws IOException, ServletException {
      HttpServletRequest req = (HttpServletRequest) request;
      HttpServletResponse res = (HttpServletResponse) response;
      String path = req.getRequestURI();
      if (path.equals("/test/tokens-issued") || path.equals("/test/expired-refusals")) {
        res.setContentType("text/plain");
        long n = path.endsWith("issued") ? issued.get() : expiredRefusals.get();
        res.getWriter().write(Long.toString(n));
        return;
      }
      if (!failFile.isEmpty() && Files.exists(Path.of(failFile))) {
        answer(res, 503, "ServiceUnavailableException", "injected outage");
        return;
      }
      if (path.equals("/v1/oauth/tokens")) {
        issueToken(req, res);
        return;
      }
      if (secured()) {
        String auth = req.getHeader("Authorization");
        String token = auth != null && auth.startsWith("Bearer ") ? auth.substring(7) : "";
        Long expires = tokens.get(token);
        boolean valid =
            (!staticToken.isEmpty() && token.equals(staticToken))
                || (expires != null && expires > System.currentTimeMillis());
        if (!valid) {
          if (expires != null) {
            expiredRefusals.incrementAndGet();
          }
          answer(res, 401, "NotAuthorizedException", "missing, unknown or expired token");
          return;
        }
      }
      // /v1/{prefix?}/namespaces/{ns}/(tables|views)/{name}
      String[] parts = path.split("/");
      for (int i = 0; i + 3 < parts.length; i++) {
        if (parts[i].equals("namespaces") && (parts[i + 2].equals("tables") || parts[i + 2].equals("views"))) {
          String ns = URLDecoder.decode(parts[i + 1], StandardCharsets.UTF_8);
          String name = URLDecoder.decode(parts[i + 3], StandardCharsets.UTF_8);
          if (forbidden.contains(ns + "." + name)) {
            answer(res, 403, "ForbiddenException", "not allowed");
            return;
          }
        }
      }
      chain.doFilter(request, response);
    }

    private void issueToken(HttpServletRequest req, HttpServletResponse res) throws IOException {
      Map<String, String> form = new HashMap<>();
      String body = new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      for (String kv : body.split("&")) {
        int eq = kv.indexOf('=');
        if (eq > 0) {
          form.put(
              URLDecoder.decode(kv.substring(0, eq), StandardCharsets.UTF_8),
              URLDecoder.decode(kv.substring(eq + 1), StandardCharsets.UTF_8));
        }
      }
      String id = form.getOrDefault("client_id", "");
      String secret = form.getOrDefault("client_secret", "");
      if (!"client_credentials".equals(form.get("grant_type"))
          || clients.get(id) == null
          || !clients.get(id).equals(secret)) {
        res.setStatus(401);
        res.setContentType("application/json");
        res.getWriter().write("{\"error\":\"invalid_client\"}");
        return;
      }
      byte[] bytes = new byte[24];
      random.nextBytes(bytes);
      String token = HexFormat.of().formatHex(bytes);
      tokens.put(token, System.currentTimeMillis() + ttlSeconds * 1000);
      issued.incrementAndGet();
      res.setStatus(200);
      res.setContentType("application/json");
      res.getWriter()
          .write(
              "{\"access_token\":\""
                  + token
                  + "\",\"token_type\":\"bearer\",\"expires_in\":"
                  + ttlSeconds
                  + ",\"issued_token_type\":\"urn:ietf:params:oauth:token-type:access_token\"}");
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> props = new HashMap<>();
    props.put(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    props.put(CatalogProperties.URI, "jdbc:sqlite:" + env("ICEBERG_DB", "iceberg.db"));
    props.put("jdbc.schema-version", "V1");
    props.put(CatalogProperties.WAREHOUSE_LOCATION, "file://" + env("ICEBERG_WAREHOUSE", "warehouse"));
    Catalog catalog = CatalogUtil.buildIcebergCatalog("semops_test", props, new Configuration());

    ServletContextHandler context = new ServletContextHandler();
    context.addFilter(new FilterHolder(new Guard()), "/*", EnumSet.allOf(jakarta.servlet.DispatcherType.class));
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(Integer.parseInt(env("ICEBERG_PORT", "0")));
    server.addConnector(connector);
    ServerConnector tls = null;
    ServerConnector extra = null;
    String keystore = env("ICEBERG_TLS_KEYSTORE", "");
    if (!keystore.isEmpty()) {
      org.eclipse.jetty.util.ssl.SslContextFactory.Server ssl =
          new org.eclipse.jetty.util.ssl.SslContextFactory.Server();
      ssl.setKeyStorePath(keystore);
      ssl.setKeyStoreType("PKCS12");
      ssl.setKeyStorePassword(env("ICEBERG_TLS_PASSWORD", ""));
      tls = new ServerConnector(server, ssl);
      tls.setHost("127.0.0.1");
      tls.setPort(Integer.parseInt(env("ICEBERG_TLS_PORT", "0")));
      server.addConnector(tls);
      String extraHost = env("ICEBERG_EXTRA_HOST", "");
      if (!extraHost.isEmpty()) {
        extra = new ServerConnector(server, ssl);
        extra.setHost(extraHost);
        extra.setPort(0);
        server.addConnector(extra);
      }
    }
    server.setHandler(context);
    server.start();
    System.out.println("listening on 127.0.0.1:" + connector.getLocalPort());
    if (tls != null) {
      System.out.println("listening with TLS on 127.0.0.1:" + tls.getLocalPort());
    }
    if (extra != null) {
      System.out.println("listening with TLS for Pods on " + extra.getHost() + ":" + extra.getLocalPort());
    }
    System.out.flush();
    server.join();
  }
}
