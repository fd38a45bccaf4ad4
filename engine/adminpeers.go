package engine

import (
	"net"
	"strings"
)

// How the processes of a group-mode job find each other's admin API, so
// that any process's web UI can show the whole job. Each process
// advertises its address in the client id of its consumer-group member,
// which the group's description (DescribeGroups) gives every member with
// the host the broker saw the member connect from: "<kafka.client_id>;admin=
// <host:port>". A process listening on every interface (0.0.0.0:8080)
// advertises ";admin=:8080", and the others take the host from the
// description. Kafka Streams advertises application.server in its
// subscription's user data instead; the client id needs nothing of the
// assignor, so processes of builds that do not advertise still balance
// with those that do.

// adminMark separates the advertised address from the client id.
const adminMark = ";admin="

// memberClientID is the client id of the consumer-group member of a
// process whose admin API is at admin ("": it advertises none).
func memberClientID(clientID, admin string) string {
	if admin == "" {
		return clientID
	}
	return clientID + adminMark + admin
}

// advertisedAdmin is the admin address a member advertised in its client
// id, its host taken from clientHost (the broker's view of the member's
// address, "/10.0.0.5") when the member left it empty; "" when it
// advertised none.
func advertisedAdmin(clientID, clientHost string) string {
	i := strings.LastIndex(clientID, adminMark)
	if i < 0 {
		return ""
	}
	host, port, err := net.SplitHostPort(clientID[i+len(adminMark):])
	if err != nil || port == "" {
		return ""
	}
	if host == "" {
		host = strings.TrimPrefix(clientHost, "/")
		if host == "" {
			return ""
		}
	}
	return net.JoinHostPort(host, port)
}

// AdvertisedAdmin is the address a process whose admin API listens on
// listen (as bound: "127.0.0.1:8081", "[::]:8080") tells the job's other
// processes, unless admin.advertise names one: listen itself, or only its
// port when its host is unspecified (every interface), for the others to
// complete with the address the brokers see.
func AdvertisedAdmin(advertise, listen string) string {
	if advertise != "" {
		return advertise
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return ":" + port
	}
	return listen
}
