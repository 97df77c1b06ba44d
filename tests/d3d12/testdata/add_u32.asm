// Test kernel for the D3D12 runtime (not a product kernel):
//   u0[i] = t0[i] + t1[i] + cb0[0].y  (uint32, wrapping) for i < cb0[0].x
// HLSL equivalent:
//   ByteAddressBuffer A : register(t0); ByteAddressBuffer B : register(t1);
//   RWByteAddressBuffer C : register(u0); cbuffer P : register(b0) { uint n; uint bias; };
//   [numthreads(64,1,1)] void main(uint3 id : SV_DispatchThreadID) {
//     if (id.x < n) C.Store(id.x*4, A.Load(id.x*4) + B.Load(id.x*4) + bias); }
dcl_constantbuffer cb0[1], immediateIndexed
dcl_resource_raw t0
dcl_resource_raw t1
dcl_uav_raw u0
dcl_input vThreadID.x
dcl_temps 1
dcl_thread_group 64, 1, 1
ult r0.x, vThreadID.x, cb0[0].x
if_nz r0.x
  ishl r0.x, vThreadID.x, l(2)
  ld_raw r0.y, r0.x, t0.xxxx
  ld_raw r0.z, r0.x, t1.xxxx
  iadd r0.y, r0.y, r0.z
  iadd r0.y, r0.y, cb0[0].y
  store_raw u0.x, r0.x, r0.yyyy
endif
ret
