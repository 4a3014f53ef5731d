"""The TCP transport (issues 3 and 9): ``tcp_rpc_service`` (the RpcService, composed of the
parts below and an EndpointRegistry), ``connection_acceptor`` (listening, admission, the
acceptor's handshake), ``outgoing_connections`` (one connection per peer service), ``connection``
(calls, replies, lookups, keepalives), ``socket_link`` (a socket carrying frames), ``framing``,
``handshake`` (proof of the cluster secret, channel keys), ``channel_mac`` (sealed records),
``admission`` (caps on connections being authenticated), ``keepalive``, ``remote_dispatch``
(what peers may call), ``remote_errors``, ``transport_security`` (secret and TLS)."""
