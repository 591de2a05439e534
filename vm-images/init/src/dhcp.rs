//! DHCP's messages (RFC 2131), as far as a client of QEMU's user-mode
//! network needs them: DISCOVER and REQUEST written, OFFER and ACK read.
//! Pure code; `net.rs` sends and receives them.

use std::net::Ipv4Addr;

/// The BOOTP header's fixed part, before the magic cookie.
const HEADER: usize = 236;
const MAGIC: [u8; 4] = [99, 130, 83, 99];
/// BOOTP's vendor area: libslirp ignores a request shorter than a whole
/// `struct bootp_t`, whose options area is 312 bytes.
const OPTIONS_AREA: usize = 312;

const OPT_PAD: u8 = 0;
const OPT_SUBNET_MASK: u8 = 1;
const OPT_ROUTER: u8 = 3;
const OPT_DNS: u8 = 6;
const OPT_REQUESTED_IP: u8 = 50;
const OPT_MESSAGE_TYPE: u8 = 53;
const OPT_SERVER_ID: u8 = 54;
const OPT_PARAMETERS: u8 = 55;
const OPT_END: u8 = 255;

/// DHCP message types (option 53).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Discover = 1,
    Offer = 2,
    Request = 3,
    Ack = 5,
    Nak = 6,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Discover,
            2 => Kind::Offer,
            3 => Kind::Request,
            5 => Kind::Ack,
            6 => Kind::Nak,
            _ => return None,
        })
    }
}

/// A server's OFFER or ACK: what the client is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub kind: Kind,
    pub address: Ipv4Addr,
    pub server: Option<Ipv4Addr>,
    pub netmask: Option<Ipv4Addr>,
    pub router: Option<Ipv4Addr>,
    pub dns: Vec<Ipv4Addr>,
}

/// A client message from the interface with hardware address `mac`:
/// DISCOVER, or REQUEST for `offer`'s address from its server. The
/// broadcast flag asks for broadcast replies, which an interface without
/// an address can receive.
pub fn message(kind: Kind, xid: u32, mac: [u8; 6], offer: Option<&Reply>) -> Vec<u8> {
    let mut p = vec![0u8; HEADER];
    p[0] = 1; // BOOTREQUEST
    p[1] = 1; // Ethernet
    p[2] = 6;
    p[4..8].copy_from_slice(&xid.to_be_bytes());
    p[10] = 0x80; // broadcast
    p[28..34].copy_from_slice(&mac);
    p.extend(MAGIC);
    p.extend([OPT_MESSAGE_TYPE, 1, kind as u8]);
    if let Some(offer) = offer {
        p.extend([OPT_REQUESTED_IP, 4]);
        p.extend(offer.address.octets());
        if let Some(server) = offer.server {
            p.extend([OPT_SERVER_ID, 4]);
            p.extend(server.octets());
        }
    }
    p.extend([OPT_PARAMETERS, 3, OPT_SUBNET_MASK, OPT_ROUTER, OPT_DNS]);
    p.push(OPT_END);
    p.resize(HEADER + OPTIONS_AREA, OPT_PAD);
    p
}

/// The server's reply in `packet`, if it is one to the client `xid` with
/// `mac`; anything else (another client's, a malformed one) is None.
pub fn parse_reply(packet: &[u8], xid: u32, mac: [u8; 6]) -> Option<Reply> {
    if packet.len() < HEADER + MAGIC.len()
        || packet[0] != 2
        || packet[4..8] != xid.to_be_bytes()
        || packet[28..34] != mac
        || packet[HEADER..HEADER + 4] != MAGIC
    {
        return None;
    }
    let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    let mut reply = Reply {
        kind: Kind::Nak,
        address: ip(&packet[16..20]),
        server: None,
        netmask: None,
        router: None,
        dns: Vec::new(),
    };
    let mut kind = None;
    let mut rest = &packet[HEADER + 4..];
    while let [code, tail @ ..] = rest {
        match *code {
            OPT_PAD => {
                rest = tail;
                continue;
            }
            OPT_END => break,
            _ => {}
        }
        let (&len, tail) = tail.split_first()?;
        let value = tail.get(..len as usize)?;
        rest = &tail[len as usize..];
        match (*code, value.len()) {
            (OPT_MESSAGE_TYPE, 1) => kind = Kind::from_byte(value[0]),
            (OPT_SERVER_ID, 4) => reply.server = Some(ip(value)),
            (OPT_SUBNET_MASK, 4) => reply.netmask = Some(ip(value)),
            (OPT_ROUTER, n) if n >= 4 => reply.router = Some(ip(value)),
            (OPT_DNS, n) if n % 4 == 0 => reply.dns = value.chunks(4).map(ip).collect(),
            _ => {}
        }
    }
    reply.kind = kind?;
    Some(reply)
}

/// `/etc/resolv.conf` for the servers a lease names.
pub fn resolv_conf(dns: &[Ipv4Addr]) -> String {
    dns.iter().map(|d| format!("nameserver {d}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];

    /// What libslirp sends: an ACK with mask, router and DNS.
    fn server_reply(kind: u8, xid: u32) -> Vec<u8> {
        let mut p = vec![0u8; HEADER];
        p[0] = 2;
        p[4..8].copy_from_slice(&xid.to_be_bytes());
        p[16..20].copy_from_slice(&[10, 0, 2, 15]);
        p[28..34].copy_from_slice(&MAC);
        p.extend(MAGIC);
        p.extend([OPT_MESSAGE_TYPE, 1, kind]);
        p.extend([OPT_SERVER_ID, 4, 10, 0, 2, 2]);
        p.extend([OPT_PAD, OPT_SUBNET_MASK, 4, 255, 255, 255, 0]);
        p.extend([OPT_ROUTER, 4, 10, 0, 2, 2]);
        p.extend([OPT_DNS, 8, 10, 0, 2, 3, 1, 1, 1, 1]);
        p.extend([51, 4, 0, 1, 0x51, 0x80]); // lease time: skipped
        p.push(OPT_END);
        p
    }

    #[test]
    fn requests_are_whole_bootp_packets_with_the_offer_named() {
        let d = message(Kind::Discover, 0x1234_5678, MAC, None);
        assert_eq!(d.len(), 548, "a whole struct bootp_t");
        assert_eq!((d[0], d[1], d[2], d[10]), (1, 1, 6, 0x80));
        assert_eq!(d[4..8], [0x12, 0x34, 0x56, 0x78]);
        assert_eq!(d[28..34], MAC);
        assert_eq!(d[236..243], [99, 130, 83, 99, 53, 1, 1]);
        let offer = parse_reply(&server_reply(2, 7), 7, MAC).unwrap();
        let r = message(Kind::Request, 7, MAC, Some(&offer));
        assert_eq!(
            r[240..255],
            [53, 1, 3, 50, 4, 10, 0, 2, 15, 54, 4, 10, 0, 2, 2]
        );
        assert_eq!(r[255..261], [55, 3, 1, 3, 6, 255]);
    }

    #[test]
    fn a_reply_gives_the_address_mask_router_and_dns() {
        let ack = parse_reply(&server_reply(5, 9), 9, MAC).unwrap();
        assert_eq!(
            ack,
            Reply {
                kind: Kind::Ack,
                address: Ipv4Addr::new(10, 0, 2, 15),
                server: Some(Ipv4Addr::new(10, 0, 2, 2)),
                netmask: Some(Ipv4Addr::new(255, 255, 255, 0)),
                router: Some(Ipv4Addr::new(10, 0, 2, 2)),
                dns: vec![Ipv4Addr::new(10, 0, 2, 3), Ipv4Addr::new(1, 1, 1, 1)],
            }
        );
        assert_eq!(
            resolv_conf(&ack.dns),
            "nameserver 10.0.2.3\nnameserver 1.1.1.1\n"
        );
    }

    #[test]
    fn other_clients_replies_and_broken_packets_are_not_ours() {
        let good = server_reply(5, 9);
        assert!(parse_reply(&good, 10, MAC).is_none(), "another xid");
        let mut other = MAC;
        other[5] ^= 1;
        assert!(parse_reply(&good, 9, other).is_none(), "another client");
        assert!(parse_reply(&good[..200], 9, MAC).is_none(), "short");
        let mut request = good.clone();
        request[0] = 1;
        assert!(parse_reply(&request, 9, MAC).is_none(), "a request");
        let mut cut = good.clone();
        cut.truncate(cut.len() - 8); // inside the lease-time option
        assert!(
            parse_reply(&cut, 9, MAC).is_none(),
            "an option past the end"
        );
        let mut no_type = good;
        no_type[242] = 9;
        assert!(parse_reply(&no_type, 9, MAC).is_none(), "unknown type");
    }
}
