#!/usr/bin/env python3
"""Writes the Windows discovery fixtures: IOCTL output buffers laid out
byte for byte as winioctl.h / ntddvol.h document them, one annotated hex
file per answer, plus the Win32 facts (volumes.json) and Storage WMI rows
(spaces.json). It is independent of the Go decoders on purpose: the layouts
here are written from the Windows SDK documentation, not from Go code.

Run from this directory: python3 mkfixtures.py
File names: volumes/<Volume{guid}>/<IOCTL>[-<input>].hex and
disks/PhysicalDrive<n>/<IOCTL>[-<property id>].hex; <name>.err holds the
Win32 error a call returns instead.
"""
import json, os, shutil, struct, uuid

def q(fmt, *v):  # little-endian pack
    return struct.pack('<' + fmt, *v)

def emit(path, fields, title):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    total = sum(len(b) for b, _ in fields)
    with open(path, 'w') as f:
        f.write('# %s (%d bytes)\n' % (title, total))
        off = 0
        for b, c in fields:
            for i in range(0, len(b), 16):
                chunk = b[i:i + 16]
                f.write('%-48s # +%-3d %s\n' % (' '.join('%02x' % x for x in chunk), off + i, c if i == 0 else '...'))
            off += len(b)

def err(path, msg):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(msg + '\n')

def guid_bytes(s):
    return uuid.UUID(s).bytes_le

# --- buffers ---------------------------------------------------------------

def disk_extents(extents):  # VOLUME_DISK_EXTENTS
    f = [(q('I', len(extents)), 'NumberOfDiskExtents'), (bytes(4), 'padding')]
    for i, (disk, start, length) in enumerate(extents):
        f += [(q('I', disk), 'Extents[%d].DiskNumber = %d' % (i, disk)), (bytes(4), 'padding'),
              (q('q', start), 'Extents[%d].StartingOffset = %d' % (i, start)),
              (q('q', length), 'Extents[%d].ExtentLength = %d' % (i, length))]
    return f

def part_mbr(start, length, number, ptype=0x07, hidden=None):  # PARTITION_INFORMATION_EX, MBR arm
    hidden = start // 512 if hidden is None else hidden
    f = [(q('I', 0), 'PartitionStyle = PARTITION_STYLE_MBR'), (bytes(4), 'padding'),
         (q('q', start), 'StartingOffset = %d' % start), (q('q', length), 'PartitionLength = %d' % length),
         (q('I', number), 'PartitionNumber = %d' % number), (b'\x00', 'RewritePartition'),
         (b'\x00', 'IsServicePartition'), (bytes(2), 'padding'),
         (bytes([ptype]), 'Mbr.PartitionType = 0x%02x' % ptype), (b'\x00', 'Mbr.BootIndicator'),
         (b'\x01', 'Mbr.RecognizedPartition'), (bytes(1), 'padding'),
         (q('I', hidden), 'Mbr.HiddenSectors = %d' % hidden), (bytes(16), 'Mbr.PartitionId (GUID, zero before 1809)'),
         (bytes(88), 'rest of the union (GPT arm is 112 bytes)')]
    return f

BASIC_DATA = 'ebd0a0a2-b9e5-4433-87c0-68b6b72699c7'

def part_gpt(start, length, number, name, pid):
    n = name.encode('utf-16-le').ljust(72, b'\x00')
    return [(q('I', 1), 'PartitionStyle = PARTITION_STYLE_GPT'), (bytes(4), 'padding'),
            (q('q', start), 'StartingOffset = %d' % start), (q('q', length), 'PartitionLength = %d' % length),
            (q('I', number), 'PartitionNumber = %d' % number), (b'\x00', 'RewritePartition'),
            (b'\x00', 'IsServicePartition'), (bytes(2), 'padding'),
            (guid_bytes(BASIC_DATA), 'Gpt.PartitionType = PARTITION_BASIC_DATA_GUID'),
            (guid_bytes(pid), 'Gpt.PartitionId = ' + pid),
            (q('Q', 0), 'Gpt.Attributes'), (n, 'Gpt.Name = "%s"' % name)]

def access_alignment(logical, physical, cache_line=64, off_sector=0):
    return [(q('I', 28), 'Version'), (q('I', 28), 'Size'), (q('I', cache_line), 'BytesPerCacheLine'),
            (q('I', 0), 'BytesOffsetForCacheAlignment'), (q('I', logical), 'BytesPerLogicalSector = %d' % logical),
            (q('I', physical), 'BytesPerPhysicalSector = %d' % physical),
            (q('I', off_sector), 'BytesOffsetForSectorAlignment = %d' % off_sector)]

def seek_penalty(seek):
    return [(q('I', 12), 'Version'), (q('I', 12), 'Size'),
            (bytes([1 if seek else 0]), 'IncursSeekPenalty = %s' % ('TRUE' if seek else 'FALSE')), (bytes(3), 'padding')]

def device_descriptor(vendor, product, rev, serial, bus, devtype=0):
    strings = b''
    base = 40
    offs = []
    for s in (vendor, product, rev, serial):
        if s is None:
            offs.append(0)
            continue
        offs.append(base + len(strings))
        strings += s.encode('ascii') + b'\x00'
    size = base + len(strings)
    f = [(q('I', 40), 'Version'), (q('I', size), 'Size = %d' % size), (bytes([devtype]), 'DeviceType'),
         (b'\x00', 'DeviceTypeModifier'), (b'\x00', 'RemovableMedia'), (b'\x01', 'CommandQueueing'),
         (q('I', offs[0]), 'VendorIdOffset'), (q('I', offs[1]), 'ProductIdOffset'),
         (q('I', offs[2]), 'ProductRevisionOffset'), (q('I', offs[3]), 'SerialNumberOffset'),
         (q('I', bus), 'BusType = 0x%02x' % bus), (q('I', 0), 'RawPropertiesLength'),
         (bytes(4), 'RawDeviceProperties[1] and padding')]
    for s, o in zip((vendor, product, rev, serial), offs):
        if o:
            f.append((s.encode('ascii') + b'\x00', '"%s"' % s))
    return f

def geometry_ex(size, bps=512):
    cyl = size // (255 * 63 * bps)
    return [(q('q', cyl), 'Geometry.Cylinders'), (q('I', 12), 'Geometry.MediaType = FixedMedia'),
            (q('I', 255), 'Geometry.TracksPerCylinder'), (q('I', 63), 'Geometry.SectorsPerTrack'),
            (q('I', bps), 'Geometry.BytesPerSector = %d' % bps), (q('q', size), 'DiskSize = %d' % size),
            (bytes(8), 'Data[1] and padding')]

def ntfs_data(serial, sectors, bps, cluster, phys=None):
    total = sectors * bps // cluster
    f = [(q('Q', serial), 'VolumeSerialNumber'), (q('q', sectors), 'NumberSectors = %d' % sectors),
         (q('q', total), 'TotalClusters = %d' % total), (q('q', total // 2), 'FreeClusters'),
         (q('q', 0), 'TotalReserved'), (q('I', bps), 'BytesPerSector = %d' % bps),
         (q('I', cluster), 'BytesPerCluster = %d' % cluster), (q('I', 1024), 'BytesPerFileRecordSegment'),
         (q('I', 0), 'ClustersPerFileRecordSegment'), (q('q', 1 << 20), 'MftValidDataLength'),
         (q('q', 786432 * 4096 // cluster), 'MftStartLcn'), (q('q', 2), 'Mft2StartLcn'),
         (q('q', 786432 * 4096 // cluster), 'MftZoneStart'), (q('q', 786432 * 4096 // cluster + 51200), 'MftZoneEnd')]
    if phys:
        f += [(q('I', 32), 'Extended.ByteCount'), (q('H', 3), 'Extended.MajorVersion'), (q('H', 1), 'Extended.MinorVersion'),
              (q('I', phys), 'Extended.BytesPerPhysicalSector = %d' % phys), (q('H', 2), 'Extended.LfsMajorVersion'),
              (q('H', 0), 'Extended.LfsMinorVersion'), (bytes(16), 'Extended trim counts')]
    return f

def refs_data(serial, sectors, bps, cluster, phys):
    total = sectors * bps // cluster
    return [(q('I', 152), 'ByteCount'), (q('I', 3), 'MajorVersion'), (q('I', 4), 'MinorVersion'),
            (q('I', phys), 'BytesPerPhysicalSector = %d' % phys), (q('Q', serial), 'VolumeSerialNumber'),
            (q('q', sectors), 'NumberSectors = %d' % sectors), (q('q', total), 'TotalClusters = %d' % total),
            (q('q', total // 2), 'FreeClusters'), (q('q', 0), 'TotalReserved'),
            (q('I', bps), 'BytesPerSector = %d' % bps), (q('I', cluster), 'BytesPerCluster = %d' % cluster),
            (q('q', 16384), 'MaximumSizeOfResidentFile'), (q('H', 0), 'FastTierDataFillRatio'),
            (q('H', 0), 'SlowTierDataFillRatio'), (q('I', 0), 'DestagesFastTierToSlowTierRate'),
            (bytes(72), 'Reserved[9]')]

def physical_offsets(pairs):
    f = [(q('I', len(pairs)), 'NumberOfPhysicalOffsets'), (bytes(4), 'padding')]
    for i, (disk, off) in enumerate(pairs):
        f += [(q('I', disk), 'PhysicalOffset[%d].DiskNumber = %d' % (i, disk)), (bytes(4), 'padding'),
              (q('q', off), 'PhysicalOffset[%d].Offset = %d' % (i, off))]
    return f

# --- writers ----------------------------------------------------------------

def vol_file(root, guid, name, fields, title):
    emit(os.path.join(root, 'volumes', guid, name + '.hex'), fields, title)

def disk(root, n, size, logical, physical, seek, vendor, product, rev, serial, bus):
    d = os.path.join(root, 'disks', 'PhysicalDrive%d' % n)
    emit(os.path.join(d, 'IOCTL_DISK_GET_DRIVE_GEOMETRY_EX.hex'), geometry_ex(size, logical), 'DISK_GEOMETRY_EX')
    emit(os.path.join(d, 'IOCTL_STORAGE_QUERY_PROPERTY-6.hex'), access_alignment(logical, physical), 'STORAGE_ACCESS_ALIGNMENT_DESCRIPTOR (StorageAccessAlignmentProperty)')
    emit(os.path.join(d, 'IOCTL_STORAGE_QUERY_PROPERTY-7.hex'), seek_penalty(seek), 'DEVICE_SEEK_PENALTY_DESCRIPTOR (StorageDeviceSeekPenaltyProperty)')
    emit(os.path.join(d, 'IOCTL_STORAGE_QUERY_PROPERTY-0.hex'), device_descriptor(vendor, product, rev, serial, bus), 'STORAGE_DEVICE_DESCRIPTOR (StorageDeviceProperty)')

def volumes_json(root, vols):
    with open(os.path.join(root, 'volumes.json'), 'w') as f:
        json.dump(vols, f, indent=2)
        f.write('\n')

def vol(guid, mps, fs, spc, bps, clusters, total, serial, label='', nt=''):
    return {'guid_path': '\\\\?\\%s\\' % guid, 'nt_device': nt, 'mount_points': mps, 'drive_type': 3,
            'fs_name': fs, 'label': label, 'serial_number': serial, 'sectors_per_cluster': spc,
            'bytes_per_sector': bps, 'total_clusters': clusters, 'total_bytes': total}

GiB = 1 << 30
here = os.path.dirname(os.path.abspath(__file__))

def scenario(name):
    root = os.path.join(here, name)
    shutil.rmtree(os.path.join(root, 'volumes'), ignore_errors=True)
    shutil.rmtree(os.path.join(root, 'disks'), ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    return root

# 1. Windows Server 2003-era MBR partition at 63 sectors (32,256 bytes) on a
#    PERC hardware RAID 10 logical drive (declared: 64 KiB stripe, 4 disks).
#    The agent is not an administrator: FSCTL_GET_NTFS_VOLUME_DATA is denied
#    and the 4 KiB cluster comes from GetDiskFreeSpace.
r = scenario('2003-mbr-raid10')
g = 'Volume{6a1c3e2f-0000-0000-0000-100000000000}'
size = 272 * GiB
plen = size - 32256
volumes_json(r, [vol(g, ['D:\\'], 'NTFS', 8, 512, plen // 4096, plen - plen % 4096, 0x4C3A1F20, 'SQLDATA', '\\Device\\HarddiskVolume2')])
vol_file(r, g, 'IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS', disk_extents([(1, 32256, plen)]), 'VOLUME_DISK_EXTENTS')
vol_file(r, g, 'IOCTL_DISK_GET_PARTITION_INFO_EX', part_mbr(32256, plen, 1), 'PARTITION_INFORMATION_EX')
err(os.path.join(r, 'volumes', g, 'FSCTL_GET_NTFS_VOLUME_DATA.err'), 'Access is denied.')
disk(r, 1, size, 512, 512, True, 'DELL', 'PERC 6/i', '1.22', '00c8f1e2d3a4b5c6', 0x08)

# 2. Windows Server 2008+ GPT data partition at 1 MiB with 64 KiB clusters on
#    a hardware RAID 5 declared by serial (128 KiB stripe, 5 disks); SSDs.
r = scenario('2008-gpt-64k')
g = 'Volume{8d2f9b41-1111-4a5b-9c6d-200000000000}'
size = 1788 * GiB
start = 1 << 20
plen = size - start - (1 << 20)
volumes_json(r, [vol(g, ['E:\\', 'C:\\MountPoints\\SQLData\\'], 'NTFS', 128, 512, plen // 65536, plen - plen % 65536, 0x9A0B1C2D, 'SQLDATA2', '\\Device\\HarddiskVolume7')])
vol_file(r, g, 'IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS', disk_extents([(2, start, plen)]), 'VOLUME_DISK_EXTENTS')
vol_file(r, g, 'IOCTL_DISK_GET_PARTITION_INFO_EX', part_gpt(start, plen, 2, 'Basic data partition', '4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f60718'), 'PARTITION_INFORMATION_EX')
vol_file(r, g, 'FSCTL_GET_NTFS_VOLUME_DATA', ntfs_data(0x2C1B0A9988776655, plen // 512, 512, 65536, 512), 'NTFS_VOLUME_DATA_BUFFER + NTFS_EXTENDED_VOLUME_DATA')
disk(r, 2, size, 512, 512, False, 'HPE', 'LOGICAL VOLUME', '7.00', 'PDNMF0ARH8A0PL', 0x08)

# 3. A 512e disk (512-byte logical, 4 KiB physical sectors) carrying an old
#    MBR partition at 63 sectors: every 4 KiB write straddles two physical
#    sectors. No RAID (a single SATA disk).
r = scenario('512e-mbr-63')
g = 'Volume{1f0e2d3c-2222-4b4a-8a9b-300000000000}'
size = 2000398934016
plen = size - 32256
volumes_json(r, [vol(g, ['F:\\'], 'NTFS', 8, 512, plen // 4096, plen - plen % 4096, 0x11223344, 'LOGS', '\\Device\\HarddiskVolume4')])
vol_file(r, g, 'IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS', disk_extents([(3, 32256, plen)]), 'VOLUME_DISK_EXTENTS')
vol_file(r, g, 'IOCTL_DISK_GET_PARTITION_INFO_EX', part_mbr(32256, plen, 1), 'PARTITION_INFORMATION_EX')
vol_file(r, g, 'FSCTL_GET_NTFS_VOLUME_DATA', ntfs_data(0x5566778899AABBCC, plen // 512, 512, 4096, 4096), 'NTFS_VOLUME_DATA_BUFFER + NTFS_EXTENDED_VOLUME_DATA')
disk(r, 3, size, 512, 4096, True, 'ATA', 'ST2000DM008-2FR102', '0001', 'ZFL1A2B3', 0x0B)

# 4. A Storage Spaces simple (striped) virtual disk: 4 columns, 256 KiB
#    interleave, ReFS with 64 KiB clusters, GPT partition after the 128 MiB
#    MSR at 129 MiB (a multiple of 256 KiB).
r = scenario('spaces-striped')
g = 'Volume{a7b6c5d4-3333-4c3d-9e8f-400000000000}'
size = 4 * 1024 * GiB
start = 135266304
plen = size - start - (1 << 20)
volumes_json(r, [vol(g, ['S:\\'], 'ReFS', 128, 512, plen // 65536, plen - plen % 65536, 0xA1B2C3D4, 'SPACE1', '\\Device\\HarddiskVolume9')])
vol_file(r, g, 'IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS', disk_extents([(4, start, plen)]), 'VOLUME_DISK_EXTENTS')
vol_file(r, g, 'IOCTL_DISK_GET_PARTITION_INFO_EX', part_gpt(start, plen, 2, 'Basic data partition', '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d'), 'PARTITION_INFORMATION_EX')
vol_file(r, g, 'FSCTL_GET_REFS_VOLUME_DATA', refs_data(0x0F1E2D3C4B5A6978, plen // 512, 512, 65536, 4096), 'REFS_VOLUME_DATA_BUFFER')
disk(r, 4, size, 512, 4096, False, 'Msft', 'Storage Space', '0.1', '{5d1e0a7f-3c2b-4e11-9f00-5e5c5a5b5d5e}', 0x10)
with open(os.path.join(r, 'spaces.json'), 'w') as f:
    # winSource.virtualDisks' answer: MSFT_VirtualDisk rows already joined
    # with the surfaced disk's number (joinVirtualDisks); a lone row may be
    # written as an object instead of an array.
    json.dump({'DiskNumber': 4, 'FriendlyName': 'SQLData', 'UniqueId': '7F0A1E5D2B3C4E11900F5E5C5A5B5D5E',
               'ResiliencySettingName': 'Simple', 'NumberOfColumns': 4, 'NumberOfDataCopies': 1,
               'PhysicalDiskRedundancy': 0, 'Interleave': 262144, 'LogicalSectorSize': 512,
               'PhysicalSectorSize': 4096, 'Size': size}, f, indent=2)
    f.write('\n')

# 5. A dynamic striped volume over two dynamic disks (64 KiB stripe, Windows'
#    fixed size for striped volumes), extents at 1 MiB on each disk.
#    IOCTL_DISK_GET_PARTITION_INFO_EX on a dynamic volume fails.
r = scenario('dynamic-striped')
g = 'Volume{c3d2e1f0-4444-4d5e-8f9a-500000000000}'
ext = 500 * GiB
volumes_json(r, [vol(g, ['G:\\'], 'NTFS', 128, 512, 2 * ext // 65536, 2 * ext, 0x0BADF00D, 'STRIPE', '\\Device\\HarddiskDmVolumes\\WIN-SQL01Dg0\\Volume1')])
vol_file(r, g, 'IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS', disk_extents([(5, 1 << 20, ext), (6, 1 << 20, ext)]), 'VOLUME_DISK_EXTENTS')
err(os.path.join(r, 'volumes', g, 'IOCTL_DISK_GET_PARTITION_INFO_EX.err'), 'Incorrect function.')
vol_file(r, g, 'FSCTL_GET_NTFS_VOLUME_DATA', ntfs_data(0x00112233DEADBEEF, 2 * ext // 512, 512, 65536, 512), 'NTFS_VOLUME_DATA_BUFFER + NTFS_EXTENDED_VOLUME_DATA')
for lo in (0, 4096, 8192, 16384, 32768, 65536):
    stripe = lo // 65536
    d, off = (5, 6)[stripe % 2], (1 << 20) + (stripe // 2) * 65536 + lo % 65536
    vol_file(r, g, 'IOCTL_VOLUME_LOGICAL_TO_PHYSICAL-%d' % lo, physical_offsets([(d, off)]), 'VOLUME_PHYSICAL_OFFSETS for logical offset %d' % lo)
for n in (5, 6):
    disk(r, n, 600 * GiB, 512, 512, True, 'SEAGATE', 'ST600MM0006', 'LS0A', 'S0M1%04d' % n, 0x0A)
