//! `bpflab.net=user`: the guest's network interface up, its address,
//! netmask, default route and DNS servers from QEMU's DHCP server, as a
//! machine on QEMU's user-mode network gets them.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::dhcp::{self, Kind, Reply};
use crate::sys::describe;

/// Where the lease's resolv.conf is written (the initramfs is writable);
/// a host command's root gets it over its own /etc/resolv.conf.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// Tries per message: QEMU answers at once, but a packet may be sent
/// before the link is ready.
const TRIES: u32 = 4;

/// Brings the first network interface up and configures it from DHCP;
/// returns a line saying what it got.
pub fn configure() -> Result<String, String> {
    let iface = first_interface()?;
    let mac = hardware_address(&iface)?;
    set_flags(&iface, libc::IFF_UP as libc::c_short)?;
    let socket = dhcp_socket(&iface)?;
    // Unique enough per boot: the replies of another boot never reach us.
    let xid = std::process::id() ^ (clock_nanos() as u32);
    let offer = exchange(&socket, Kind::Discover, xid, mac, None, Kind::Offer)?;
    let ack = exchange(&socket, Kind::Request, xid, mac, Some(&offer), Kind::Ack)?;
    drop(socket);
    let netmask = ack.netmask.unwrap_or(Ipv4Addr::new(255, 255, 255, 0));
    set_address(&iface, libc::SIOCSIFADDR, ack.address)?;
    set_address(&iface, libc::SIOCSIFNETMASK, netmask)?;
    if let Some(router) = ack.router {
        add_default_route(router)?;
    }
    std::fs::create_dir_all("/etc")
        .and_then(|()| std::fs::write(RESOLV_CONF, dhcp::resolv_conf(&ack.dns)))
        .map_err(|e| describe(&format!("write {RESOLV_CONF}"), &e))?;
    Ok(format!(
        "network: {iface} {}/{} via {} dns {}",
        ack.address,
        netmask,
        ack.router.map_or("-".to_string(), |r| r.to_string()),
        ack.dns
            .iter()
            .map(Ipv4Addr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    ))
}

/// The first interface that is not loopback, by name.
fn first_interface() -> Result<String, String> {
    let entries =
        std::fs::read_dir("/sys/class/net").map_err(|e| describe("list /sys/class/net", &e))?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lo")
        .collect();
    names.sort();
    names.into_iter().next().ok_or_else(|| {
        "network: no network interface in the guest: the kernel needs CONFIG_VIRTIO_NET \
         (kconfig/net.config)"
            .to_string()
    })
}

fn hardware_address(iface: &str) -> Result<[u8; 6], String> {
    let path = format!("/sys/class/net/{iface}/address");
    let text = std::fs::read_to_string(&path).map_err(|e| describe(&format!("read {path}"), &e))?;
    let bytes: Vec<u8> = text
        .trim()
        .split(':')
        .filter_map(|h| u8::from_str_radix(h, 16).ok())
        .collect();
    bytes
        .try_into()
        .map_err(|_| format!("network: {path} holds no MAC address: {text:?}"))
}

/// A UDP socket on port 68 of `iface` alone, that may broadcast.
fn dhcp_socket(iface: &str) -> Result<UdpSocket, String> {
    let socket = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 68))
        .map_err(|e| describe("bind udp 0.0.0.0:68 (is CONFIG_INET in the kernel?)", &e))?;
    socket
        .set_broadcast(true)
        .map_err(|e| describe("SO_BROADCAST", &e))?;
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .map_err(|e| describe("SO_RCVTIMEO", &e))?;
    // SAFETY: the name is a valid buffer of the length given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            iface.as_ptr().cast(),
            iface.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(describe(
            &format!("SO_BINDTODEVICE {iface}"),
            &io::Error::last_os_error(),
        ));
    }
    Ok(socket)
}

/// Sends `kind` until the server's `want` arrives (TRIES seconds at most).
fn exchange(
    socket: &UdpSocket,
    kind: Kind,
    xid: u32,
    mac: [u8; 6],
    offer: Option<&Reply>,
    want: Kind,
) -> Result<Reply, String> {
    let packet = dhcp::message(kind, xid, mac, offer);
    let server = SocketAddrV4::new(Ipv4Addr::BROADCAST, 67);
    let mut buf = [0u8; 1500];
    for _ in 0..TRIES {
        socket
            .send_to(&packet, server)
            .map_err(|e| describe(&format!("send DHCP {kind:?}"), &e))?;
        while let Ok(n) = socket.recv(&mut buf) {
            match dhcp::parse_reply(&buf[..n], xid, mac) {
                Some(r) if r.kind == want => return Ok(r),
                Some(r) if r.kind == Kind::Nak => {
                    return Err(format!("network: the DHCP server refused {kind:?} (NAK)"))
                }
                _ => {}
            }
        }
    }
    Err(format!(
        "network: no DHCP {want:?} from QEMU in {TRIES} s (is the guest on `-netdev user`?)"
    ))
}

/// An ifreq for `iface` on a fresh AF_INET socket, handed to `f`.
fn with_ifreq<T>(
    iface: &str,
    f: impl FnOnce(libc::c_int, &mut libc::ifreq) -> Result<T, String>,
) -> Result<T, String> {
    // SAFETY: socket has no memory arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(describe("socket AF_INET", &io::Error::last_os_error()));
    }
    // SAFETY: ifreq is plain data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(iface.bytes().take(15)) {
        *dst = src as libc::c_char;
    }
    let result = f(fd, &mut ifr);
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    result
}

fn ioctl(
    fd: libc::c_int,
    request: libc::Ioctl,
    arg: *mut libc::c_void,
    what: &str,
) -> Result<(), String> {
    // SAFETY: each caller passes the structure `request` takes.
    if unsafe { libc::ioctl(fd, request, arg) } < 0 {
        return Err(describe(what, &io::Error::last_os_error()));
    }
    Ok(())
}

fn set_flags(iface: &str, flags: libc::c_short) -> Result<(), String> {
    with_ifreq(iface, |fd, ifr| {
        let p: *mut libc::ifreq = ifr;
        ioctl(
            fd,
            libc::SIOCGIFFLAGS,
            p.cast(),
            &format!("SIOCGIFFLAGS {iface}"),
        )?;
        // SAFETY: SIOCGIFFLAGS filled the flags member.
        unsafe { ifr.ifr_ifru.ifru_flags |= flags };
        let p: *mut libc::ifreq = ifr;
        ioctl(
            fd,
            libc::SIOCSIFFLAGS,
            p.cast(),
            &format!("SIOCSIFFLAGS {iface}"),
        )
    })
}

fn sockaddr(addr: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size, and the kernel
    // reads it as sockaddr_in by its family.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn set_address(iface: &str, request: libc::Ioctl, addr: Ipv4Addr) -> Result<(), String> {
    with_ifreq(iface, |fd, ifr| {
        ifr.ifr_ifru.ifru_addr = sockaddr(addr);
        let p: *mut libc::ifreq = ifr;
        ioctl(fd, request, p.cast(), &format!("set {addr} on {iface}"))
    })
}

fn add_default_route(router: Ipv4Addr) -> Result<(), String> {
    with_ifreq("lo", |fd, _| {
        // SAFETY: rtentry is plain data.
        let mut rt: libc::rtentry = unsafe { std::mem::zeroed() };
        rt.rt_dst = sockaddr(Ipv4Addr::UNSPECIFIED);
        rt.rt_genmask = sockaddr(Ipv4Addr::UNSPECIFIED);
        rt.rt_gateway = sockaddr(router);
        rt.rt_flags = libc::RTF_UP | libc::RTF_GATEWAY;
        let p: *mut libc::rtentry = &mut rt;
        ioctl(
            fd,
            libc::SIOCADDRT,
            p.cast(),
            &format!("default route via {router}"),
        )
    })
}

fn clock_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
