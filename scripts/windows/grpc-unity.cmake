# Unity build of gRPC's libraries for the Windows cross-build, included into
# gRPC's project by scripts/windows-deps.sh (CMAKE_PROJECT_INCLUDE).
#
# Why: gRPC's C++ files spend most of their compile time parsing the same
# headers (Abseil, gRPC core's own): -O2 instead of -O3 saves nothing, and the
# 420 files of its core took about 10 of the 18 minutes a cold
# scripts/windows-deps.sh spent on gRPC. Compiling them 16 to a translation
# unit parses those headers once per 16 files.
#
# What may not share a translation unit: files that define the same
# file-local names (a `static const ... vtable`, an anonymous-namespace
# constant, a function of the same name), or that declare in a namespace what
# another defines globally. Such clashes are compile errors. (A silent change
# would need a file to pick up an earlier file's local overload or macro in
# place of its own: the Windows tests under wine, TLS and every client among
# them, run on this build.) The files below are the ones gRPC 1.51.1 (Debian
# 12) needs kept apart, found by building with every file in and taking out
# each file an error named, until the build passed. They compile on their own,
# as in a normal build. upb's generated C files (about 280, under a tenth of a second
# each) all clash on their `descriptor` and `deps` tables and stay apart too.
#
# A gRPC of another version (a Debian update) may clash elsewhere: the unity
# build then fails naming the two definitions, windows-deps.sh says so and
# builds gRPC file by file instead, and the file named belongs on this list.

# CMAKE_PROJECT_INCLUDE comes with every project() call: one deferred call.
include_guard(GLOBAL)

set(dmlserve_grpc_unity_apart
  src/core/ext/filters/client_channel/lb_policy/weighted_target/weighted_target.cc
  src/core/ext/transport/chttp2/transport/bin_encoder.cc
  src/core/ext/xds/xds_channel_stack_modifier.cc
  src/core/lib/security/credentials/alts/grpc_alts_credentials_server_options.cc
  src/core/lib/security/credentials/external/external_account_credentials.cc
  src/core/tsi/alts/frame_protector/alts_counter.cc
  src/core/tsi/alts/frame_protector/alts_crypter.cc
  src/core/tsi/alts/frame_protector/alts_record_protocol_crypter_common.cc
  src/core/tsi/alts/frame_protector/alts_seal_privacy_integrity_crypter.cc
  src/core/tsi/alts/frame_protector/alts_unseal_privacy_integrity_crypter.cc
  src/core/tsi/alts/handshaker/alts_handshaker_client.cc
  src/core/tsi/alts/zero_copy_frame_protector/alts_grpc_integrity_only_record_protocol.cc
  src/core/tsi/alts/zero_copy_frame_protector/alts_grpc_privacy_integrity_record_protocol.cc
  src/core/tsi/alts/zero_copy_frame_protector/alts_grpc_record_protocol_common.cc
  src/core/tsi/alts/zero_copy_frame_protector/alts_iovec_record_protocol.cc
  src/core/tsi/alts/zero_copy_frame_protector/alts_zero_copy_grpc_protector.cc
  src/core/tsi/fake_transport_security.cc
  src/core/tsi/local_transport_security.cc
  src/core/tsi/ssl_transport_security.cc
  src/cpp/client/client_context.cc
  src/cpp/client/credentials_cc.cc
  src/cpp/client/secure_credentials.cc
  src/cpp/common/alarm.cc
  src/cpp/common/completion_queue_cc.cc
  src/cpp/server/server_context.cc
  src/cpp/server/server_credentials.cc
  src/cpp/util/byte_buffer_cc.cc)

# Run once gRPC's CMakeLists.txt has defined its targets. DMLSERVE_GRPC_UNITY=OFF
# leaves gRPC's build as it is (windows-deps.sh's fallback).
function(dmlserve_grpc_unity_build)
  if(DEFINED DMLSERVE_GRPC_UNITY AND NOT DMLSERVE_GRPC_UNITY)
    return()
  endif()
  foreach(target IN ITEMS gpr grpc grpc++ grpc++_reflection grpc++_alts grpc++_error_details
                          grpcpp_channelz grpc_plugin_support)
    if(NOT TARGET ${target})
      continue()
    endif()
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
    get_target_property(sources ${target} SOURCES)
    foreach(source IN LISTS sources)
      if(source MATCHES "\\.c$")
        set_source_files_properties(${source} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endforeach()
  endforeach()
  set_source_files_properties(${dmlserve_grpc_unity_apart} PROPERTIES
                              SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL dmlserve_grpc_unity_build)
