"""A fake kubelet for testing nvshare-device-plugin without a cluster.

It speaks the kubelet's side of the device-plugin API v1beta1 over UNIX
sockets with Debian's python3-grpcio and python3-protobuf. Message classes
come from device-plugin/deviceplugin.proto (and podresources.proto)
compiled with `protoc --python_out` at test time (load_messages); methods
are plain paths, so no generated service stubs are needed.

What it does, as the real kubelet does:
  - serves Registration/Register on <dir>/kubelet.sock;
  - in Register, dials the plugin's endpoint and calls
    GetDevicePluginOptions *before* replying;
  - after a successful Register, opens ListAndWatch and records every list,
    per resource name (a plugin may register several: nvshare.com/gpu and
    nvshare.com/gpu-memory; the newest registration of a name wins);
  - restart(): stops serving, deletes every socket in the directory (the
    checkpoint file is kept), serves again;
  - with a PodResources directory (and its messages): serves
    /v1.PodResourcesLister/List on <podres dir>/kubelet.sock from the
    allocations it made, each under a Pod it invents per Allocate (or is
    told), like the kubelet's podDevices; delete_pod() forgets one.
"""

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc

# The suite's machine-speed factor (tests/lib.sh speed_factor): every
# timeout here is a hang guard and is stretched by it.
SPEED = float(os.environ.get("NVS_SPEED", "1"))

P = "/v1beta1.DevicePlugin/"


def load_messages(proto_dir, out_dir, name="deviceplugin"):
    """Compiles <name>.proto for Python and imports it. Where protoc is
    missing (the GPU machines install nothing), a module compiled beforehand
    into out_dir (scripts/gpu-bundle.sh) is used as it is."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + "_pb2.py")
    proto = os.path.join(proto_dir, name + ".proto")
    have = os.path.exists(path)
    # A module compiled beforehand is used as it is unless it is older than
    # its .proto and protoc is there to do better; a protoc that fails (the
    # GPU machines have one without the well-known types) is no reason to
    # drop a module that exists.
    if not have or (shutil.which("protoc") and os.path.getmtime(path) < os.path.getmtime(proto)):
        r = subprocess.run(["protoc", "--proto_path=" + proto_dir, "--python_out=" + out_dir, proto],
                           check=not have)
        if r.returncode:
            print("# protoc failed (%d): using the module compiled beforehand, %s" % (r.returncode, path),
                  file=sys.stderr)
    spec = importlib.util.spec_from_file_location(name + "_pb2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Registration:
    def __init__(self, request, options, when):
        self.request = request
        self.options = options
        self.when = when


GPU = "nvshare.com/gpu"
MEM = "nvshare.com/gpu-memory"


class Resource:
    """What the kubelet keeps per resource name."""

    def __init__(self):
        self.channel = None
        self.law = None
        self.lists = []          # every ListAndWatchResponse, as [(id, health)]
        self.streams_opened = 0
        self.streams_ended = 0


class Waiter:
    """self.cv, notified whenever what a test waits for changes."""

    def wait(self, pred, timeout):
        """Waits until pred() holds; False after timeout seconds, a hang
        guard stretched by the suite's speed factor (NVS_SPEED)."""
        end = time.monotonic() + timeout * SPEED
        with self.cv:
            while not pred():
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(left)
            return True


class Alloc:
    """One container's devices of one resource, as the kubelet keeps them."""

    def __init__(self, ns, pod, container, resource, ids, listed=True):
        self.ns, self.pod, self.container = ns, pod, container
        self.resource, self.ids = resource, list(ids)
        # PodResources lists app containers (and restartable init
        # containers), not plain init containers.
        self.listed = listed


class FakeKubelet(Waiter):
    def __init__(self, plugin_dir, pb, podres_dir=None, prpb=None):
        self.dir = plugin_dir
        self.pb = pb
        self.cv = threading.Condition()
        self.registrations = []
        self.res = {}            # resource name -> Resource
        self.reject = 0          # reject this many Register calls
        self.rejected = 0
        self.server = None
        # PodResources (podres_dir and prpb, the podresources messages).
        self.podres_dir = podres_dir
        self.prpb = prpb
        self.podres = None
        self.allocs = []         # Alloc, in Allocate order
        self.npods = 0           # Pods invented so far
        self.last_pod = None     # (namespace, name) of the last Allocate
        self.podres_lists = 0    # PodResources List calls answered
        self.hide_pods = False   # List answers no Pod (a kubelet that has not synced)
        # hold_lists: a List that arrives outside a prestart() waits until
        # it is cleared (held counts those waiting), so that the plugin's
        # reconciliation, one List at a time, stands still meanwhile.
        self.hold_lists = False
        self.held = 0
        # list_budget: Lists are answered while fewer than this many have
        # been (None: no bound); the rest wait until it is raised, or give
        # up when their call ends (a kubelet stopped meanwhile). A test
        # counts the plugin's Lists exactly this way however fast it runs.
        self.list_budget = None
        self.prestarting = 0
        os.makedirs(plugin_dir, exist_ok=True)
        if podres_dir:
            os.makedirs(podres_dir, exist_ok=True)

    def r(self, resource=GPU):
        with self.cv:
            return self.res.setdefault(resource, Resource())

    # The nvshare.com/gpu resource's state, as before there were two.
    @property
    def lists(self):
        return self.r().lists

    @property
    def streams_opened(self):
        return self.r().streams_opened

    @property
    def streams_ended(self):
        return self.r().streams_ended

    @property
    def channel(self):
        return self.r().channel

    def regs(self, resource=GPU):
        with self.cv:
            return [x for x in self.registrations if x.request.resource_name == resource]

    # ---- serving ----
    @staticmethod
    def _serve(path, service, method, fn, req_cls, resp_cls):
        """A gRPC server with one unary method on the UNIX socket path."""
        handler = grpc.method_handlers_generic_handler(service, {
            method: grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req_cls.FromString,
                response_serializer=resp_cls.SerializeToString),
        })
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port("unix:" + path)
        server.start()
        return server

    def start(self):
        self.server = self._serve(os.path.join(self.dir, "kubelet.sock"), "v1beta1.Registration",
                                  "Register", self._register, self.pb.RegisterRequest,
                                  self.pb.Empty)
        if self.podres_dir:
            self.start_podres()

    def start_podres(self):
        self.podres = self._serve(self.podres_sock(), "v1.PodResourcesLister", "List", self._list,
                                  self.prpb.ListPodResourcesRequest,
                                  self.prpb.ListPodResourcesResponse)

    def podres_sock(self):
        return os.path.join(self.podres_dir, "kubelet.sock")

    def stop_podres(self):
        """PodResources goes away, its socket with it."""
        if self.podres is not None:
            self.podres.stop(0).wait()
            self.podres = None
        try:
            os.unlink(self.podres_sock())
        except FileNotFoundError:
            pass

    def _list(self, req, ctx):
        pr = self.prpb
        with self.cv:
            if self.hold_lists and not self.prestarting:
                self.held += 1
                self.cv.notify_all()
                self.cv.wait_for(lambda: not self.hold_lists, 60 * SPEED)
                self.held -= 1
            end = time.monotonic() + 60 * SPEED
            while (self.list_budget is not None and self.podres_lists >= self.list_budget
                   and time.monotonic() < end):
                if not ctx.is_active():
                    ctx.abort(grpc.StatusCode.UNAVAILABLE, "the kubelet stopped")
                self.cv.wait(0.05)
            pods = {}
            for a in ([] if self.hide_pods else [a for a in self.allocs if a.listed]):
                p = pods.setdefault((a.ns, a.pod), {})
                p.setdefault(a.container, []).append(
                    pr.ContainerDevices(resource_name=a.resource, device_ids=a.ids))
            self.podres_lists += 1
            self.cv.notify_all()
        return pr.ListPodResourcesResponse(pod_resources=[
            pr.PodResources(namespace=ns, name=name, containers=[
                pr.ContainerResources(name=c, devices=d) for c, d in cs.items()])
            for (ns, name), cs in pods.items()])

    def delete_pod(self, ns, name):
        """The Pod is gone: its allocations too."""
        with self.cv:
            self.allocs = [a for a in self.allocs if (a.ns, a.pod) != (ns, name)]

    def stop(self):
        """The kubelet goes away: streams cancelled, sockets deleted."""
        for r in list(self.res.values()):
            if r.law is not None:
                r.law.cancel()
                r.law = None
            if r.channel is not None:
                r.channel.close()
                r.channel = None
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None
        if self.podres_dir:
            self.stop_podres()
        for s in glob.glob(os.path.join(self.dir, "*.sock")):
            try:
                os.unlink(s)
            except FileNotFoundError:
                pass

    def restart(self):
        self.stop()
        time.sleep(0.2)
        self.start()

    def _register(self, req, ctx):
        if self.rejected < self.reject:
            self.rejected += 1
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "rejected by the test")
        if req.version != "v1beta1":
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported version " + req.version)
        if "/" not in req.resource_name:
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "not an extended resource")
        # Dial back and ask for the options before replying, like the kubelet.
        ch = grpc.insecure_channel("unix:" + os.path.join(self.dir, req.endpoint))
        try:
            opts = ch.unary_unary(P + "GetDevicePluginOptions",
                                  request_serializer=self.pb.Empty.SerializeToString,
                                  response_deserializer=self.pb.DevicePluginOptions.FromString)(
                self.pb.Empty(), timeout=10 * SPEED)
        except grpc.RpcError as e:
            ch.close()
            ctx.abort(grpc.StatusCode.UNKNOWN, "dial-back failed: %s" % e.details())
        res = self.r(req.resource_name)
        old_law, old_ch = res.law, res.channel
        res.channel = ch
        law = ch.unary_stream(P + "ListAndWatch",
                              request_serializer=self.pb.Empty.SerializeToString,
                              response_deserializer=self.pb.ListAndWatchResponse.FromString)(
            self.pb.Empty())
        res.law = law
        if old_law is not None:
            old_law.cancel()
        if old_ch is not None:
            old_ch.close()
        with self.cv:
            self.registrations.append(Registration(req, opts, time.monotonic()))
            self.cv.notify_all()
        threading.Thread(target=self._watch, args=(law, res), daemon=True).start()
        return self.pb.Empty()

    def _watch(self, law, res):
        with self.cv:
            res.streams_opened += 1
        try:
            for resp in law:
                with self.cv:
                    res.lists.append([(d.ID, d.health) for d in resp.devices])
                    self.cv.notify_all()
        except grpc.RpcError:
            pass
        with self.cv:
            res.streams_ended += 1
            self.cv.notify_all()

    # ---- helpers for tests ----
    def last_list(self, resource=GPU):
        r = self.r(resource)
        with self.cv:
            return r.lists[-1] if r.lists else None

    def _unary(self, method, req, resp_cls, timeout=5, resource=GPU):
        return self.r(resource).channel.unary_unary(
            P + method, request_serializer=type(req).SerializeToString,
            response_deserializer=resp_cls.FromString)(req, timeout=timeout * SPEED)

    def preferred(self, available, must, size, resource=GPU):
        pb = self.pb
        req = pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=available,
                                                   must_include_deviceIDs=must,
                                                   allocation_size=size)])
        r = self._unary("GetPreferredAllocation", req, pb.PreferredAllocationResponse,
                        resource=resource)
        return list(r.container_responses[0].deviceIDs)

    def allocate(self, ids, resource=GPU, pod=None, container="main", listed=True):
        """Allocate for one container; on success the devices belong to pod
        (namespace, name), or to a Pod invented for it (last_pod); listed:
        False for a plain init container, which PodResources leaves out."""
        pb = self.pb
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])
        r = self._unary("Allocate", req, pb.AllocateResponse,
                        resource=resource).container_responses[0]
        with self.cv:
            if pod is None:
                self.npods += 1
                pod = ("ns-%d" % self.npods, "pod-%d" % self.npods)
            self.last_pod = pod
            self.allocs.append(Alloc(pod[0], pod[1], container, resource, ids, listed))
        return r

    def assign(self, ids, pod, resource=GPU, container="main"):
        """The devices belong to pod from now on without an Allocate (a
        kubelet that lies, or one whose Allocate the plugin never saw)."""
        with self.cv:
            self.allocs.append(Alloc(pod[0], pod[1], container, resource, ids))

    def prestart(self, ids, resource=GPU, timeout=30):
        """PreStartContainer, as the kubelet calls it before creating the
        container (its own timeout is 30 s)."""
        pb = self.pb
        with self.cv:
            self.prestarting += 1
        try:
            return self._unary("PreStartContainer", pb.PreStartContainerRequest(devices_ids=ids),
                               pb.PreStartContainerResponse, timeout=timeout, resource=resource)
        finally:
            with self.cv:
                self.prestarting -= 1

    def release_lists(self):
        with self.cv:
            self.hold_lists = False
            self.cv.notify_all()


# ---- Dynamic Resource Allocation (nvshare-dra-plugin) ----
#
# The kubelet's side of a DRA driver: its plugin watcher finds the
# driver's registration socket in the registry directory, calls GetInfo,
# checks the type (DRAPlugin) and versions, and answers with
# NotifyRegistrationStatus; the DRA manager then calls NodePrepareResources
# and NodeUnprepareResources on the endpoint GetInfo named, with the v1
# service when the driver lists v1.DRAPlugin, else v1beta1; with the
# ResourceHealthStatus gate on it also watches v1.DRAResourceHealth.
# Message classes: dra-plugin/dra.proto compiled for Python.

REG = "/pluginregistration.Registration/"
DRA_SERVICES = {"v1": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/",
                "v1beta1": "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"}
HEALTH = "/v1.DRAResourceHealth/NodeWatchResources"
HEALTH_ALPHA = "/v1alpha1.DRAResourceHealth/NodeWatchResources"  # 1.34, 1.35


def load_dra_messages(proto_dir, out_dir):
    """dra-plugin/dra.proto compiled for Python (dra_pb2)."""
    return load_messages(proto_dir, out_dir, "dra")


class RegistrationRefused(Exception):
    pass


class FakeDRAKubelet(Waiter):
    def __init__(self, registry_dir, pb, prefer="v1"):
        self.dir = registry_dir
        self.pb = pb
        self.prefer = prefer      # "v1", or "v1beta1" to act as a 1.32 kubelet
        self.info = None
        self.version = None
        self.channel = None
        self.health_call = None
        self.health = []          # every NodeWatchResourcesResponse: [(device, health)]
        self.cv = threading.Condition()
        os.makedirs(registry_dir, exist_ok=True)

    def _unary(self, ch, path, req, resp_cls, timeout=10, wait_for_ready=None):
        return ch.unary_unary(path, request_serializer=type(req).SerializeToString,
                              response_deserializer=resp_cls.FromString)(
            req, timeout=timeout * SPEED, wait_for_ready=wait_for_ready)

    def register(self, timeout=10):
        """Finds the registration socket (polling, as a stand-in for the
        watcher's fsnotify), GetInfo, validation, NotifyRegistrationStatus.
        Returns the PluginInfo; raises RegistrationRefused after telling
        the driver why, as the kubelet does."""
        end = time.monotonic() + timeout * SPEED
        socks = []
        while time.monotonic() < end:
            socks = glob.glob(os.path.join(self.dir, "*.sock"))
            if socks:
                break
            time.sleep(0.05)
        if not socks:
            raise TimeoutError("no socket in " + self.dir)
        reg = grpc.insecure_channel("unix:" + socks[0])
        try:
            # The socket file may be a killed plugin's, left behind until its
            # restart binds a new one (the kubelet's watcher would act on
            # that creation): GetInfo waits for a listener, within its
            # deadline, instead of failing at the first refused connect.
            info = self._unary(reg, REG + "GetInfo", self.pb.InfoRequest(), self.pb.PluginInfo,
                               wait_for_ready=True)
            versions = list(info.supported_versions)
            why = None
            if info.type != "DRAPlugin":
                why = "unknown plugin type %r" % info.type
            elif "." not in info.name:
                why = "plugin name %r is not a DNS subdomain" % info.name
            elif not os.path.isabs(info.endpoint):
                why = "endpoint %r is not an absolute path" % info.endpoint
            chosen = None
            for v in ([self.prefer] + [x for x in DRA_SERVICES if x != self.prefer]):
                if v + ".DRAPlugin" in versions and v in DRA_SERVICES:
                    chosen = v
                    break
            if why is None and chosen is None:
                why = "none of the versions %r is supported" % versions
            self._unary(reg, REG + "NotifyRegistrationStatus",
                        self.pb.RegistrationStatus(plugin_registered=why is None,
                                                   error=why or ""),
                        self.pb.RegistrationStatusResponse)
            if why:
                raise RegistrationRefused(why)
            self.info, self.version = info, chosen
            if self.channel is not None:
                self.channel.close()
            self.channel = grpc.insecure_channel("unix:" + info.endpoint)
            return info
        finally:
            reg.close()

    def _claims(self, claims):
        return [self.pb.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]

    def prepare(self, claims, timeout=30):
        """claims: [(namespace, uid, name)]. Returns {uid: (devices, error)},
        devices as [(request_names, pool, device, cdi_ids, share_id)]."""
        r = self._unary(self.channel, DRA_SERVICES[self.version] + "NodePrepareResources",
                        self.pb.NodePrepareResourcesRequest(claims=self._claims(claims)),
                        self.pb.NodePrepareResourcesResponse, timeout)
        out = {}
        for uid, v in r.claims.items():
            devs = [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids),
                     d.share_id) for d in v.devices]
            out[uid] = (devs, v.error)
        return out

    def unprepare(self, claims, timeout=30):
        r = self._unary(self.channel, DRA_SERVICES[self.version] + "NodeUnprepareResources",
                        self.pb.NodeUnprepareResourcesRequest(claims=self._claims(claims)),
                        self.pb.NodeUnprepareResourcesResponse, timeout)
        return {uid: v.error for uid, v in r.claims.items()}

    def watch_health(self, path=HEALTH):
        call = self.channel.unary_stream(
            path, request_serializer=self.pb.NodeWatchResourcesRequest.SerializeToString,
            response_deserializer=self.pb.NodeWatchResourcesResponse.FromString)(
            self.pb.NodeWatchResourcesRequest())
        self.health_call = call

        def run():
            try:
                for resp in call:
                    with self.cv:
                        self.health.append([(d.device.device_name, d.health, d.message)
                                            for d in resp.devices])
                        self.cv.notify_all()
            except grpc.RpcError:
                pass
        threading.Thread(target=run, daemon=True).start()

    def stop(self):
        """The kubelet goes away (its restart): calls and channels end; the
        registration socket stays, as the plugin watcher leaves it."""
        if self.health_call is not None:
            self.health_call.cancel()
            self.health_call = None
        if self.channel is not None:
            self.channel.close()
            self.channel = None
