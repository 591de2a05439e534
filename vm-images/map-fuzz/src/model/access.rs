//! Who touches a page and how, what each may touch, and what each
//! returns when a page cannot be had.

use super::Ret;
use crate::op::Prot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A load or store of the process (or a child).
    UserRead,
    UserWrite,
    /// process_vm_readv / process_vm_writev: GUP without FOLL_FORCE.
    RemoteRead,
    RemoteWrite,
    /// /proc/self/mem: GUP with FOLL_FORCE, which reads a PROT_NONE
    /// mapping but cannot write a shared read-only one.
    ForcedRead,
    ForcedWrite,
    /// write(2) from the mapping, read(2) into it: the kernel's own
    /// copy_from_user / copy_to_user.
    CopyFromUser,
    CopyToUser,
    /// MAP_POPULATE, mlock and MADV_POPULATE_*: read faults (callers
    /// check their own permissions first).
    Populate,
}

impl Kind {
    pub fn permitted(self, prot: Prot) -> bool {
        match self {
            Kind::UserRead | Kind::RemoteRead | Kind::CopyFromUser | Kind::Populate => {
                prot.readable()
            }
            Kind::UserWrite | Kind::RemoteWrite | Kind::ForcedWrite | Kind::CopyToUser => {
                prot.writable()
            }
            // VM_MAYREAD is enough.
            Kind::ForcedRead => true,
        }
    }

    /// What the transfer returns when its first page fails.
    fn errno(self) -> i32 {
        match self {
            // mem_rw() turns a first page it cannot have into EIO.
            Kind::ForcedRead | Kind::ForcedWrite => libc::EIO,
            _ => libc::EFAULT,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// No map VMA there (the arena's PROT_NONE reserve).
    Unmapped,
    /// The VMA's protection refuses the access.
    Refused,
    /// A page zapped on base: no fault handler maps it again.
    Hole,
}

/// Why a page could not be had, and how many pages of the transfer were
/// had before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fail {
    pub cause: Cause,
    pub done: usize,
}

impl Fail {
    pub fn unmapped() -> Fail {
        Fail {
            cause: Cause::Unmapped,
            done: 0,
        }
    }

    pub fn refused() -> Fail {
        Fail {
            cause: Cause::Refused,
            done: 0,
        }
    }

    pub fn hole() -> Fail {
        Fail {
            cause: Cause::Hole,
            done: 0,
        }
    }

    /// A user access: SIGSEGV where it may not go, SIGBUS on a hole.
    pub fn user_ret(self) -> Ret {
        match self.cause {
            Cause::Unmapped | Cause::Refused => Ret::Signal(libc::SIGSEGV),
            Cause::Hole => Ret::Signal(libc::SIGBUS),
        }
    }

    /// A transfer through the kernel: the bytes moved before the fault,
    /// or the error when there were none.
    pub fn transfer_ret(self, kind: Kind, bytes: usize) -> Ret {
        if bytes > 0 {
            Ret::Partial(bytes)
        } else {
            Ret::Errno(kind.errno())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_reads_reach_prot_none_and_forced_writes_need_write() {
        assert!(Kind::ForcedRead.permitted(Prot::None));
        assert!(!Kind::ForcedWrite.permitted(Prot::Read));
        assert!(!Kind::RemoteRead.permitted(Prot::None));
        assert!(Kind::CopyFromUser.permitted(Prot::Read));
        assert!(!Kind::CopyToUser.permitted(Prot::Read));
        assert_eq!(
            Fail::refused().transfer_ret(Kind::ForcedWrite, 0),
            Ret::Errno(libc::EIO)
        );
        assert_eq!(
            Fail::hole().transfer_ret(Kind::RemoteRead, 8192),
            Ret::Partial(8192)
        );
        assert_eq!(Fail::hole().user_ret(), Ret::Signal(libc::SIGBUS));
        assert_eq!(Fail::unmapped().user_ret(), Ret::Signal(libc::SIGSEGV));
    }
}
