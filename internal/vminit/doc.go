// Package vminit is PID 1 of a vm sandbox until the guest agent takes over.
//
// The vm runtime boots the guest kernel with an initramfs holding the
// corral binary as /init and the modules needed to reach the disks and the
// agent channel. The kernel runs "/init vminit"; Main then:
//
//  1. mounts /dev, /proc and /sys and loads the initramfs's modules
//     (virtio PCI, block, console, net, overlayfs, the balloon);
//  2. finds the three disks by their serial numbers: the image's root
//     (read-only ext4, shared by every sandbox of the image), the sandbox's
//     scratch disk (ext4; holds config.json and the overlay's upper and work
//     directories) and the kernel's modules (read-only ext4);
//  3. mounts root and scratch as one overlay, the modules at
//     /lib/modules/<release> inside it, and a tmpfs at /.corral holding a
//     copy of the corral binary (the same place gVisor sandboxes have it);
//  4. configures the network from config.json (address, gateway, MAC) and
//     the hostname;
//  5. moves into the new root and execs "corral agent", which listens on
//     the virtio-serial port named corral.agent.
//
// Config is the contract between the host side (internal/runtime/vm), which
// writes config.json into the scratch disk when it formats it, and this
// package. Every failure is printed on the console (the host keeps it as
// console.log) and ends in a power-off, so the host sees the boot fail
// instead of waiting out its deadline.
package vminit
