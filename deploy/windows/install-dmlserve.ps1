<#
.SYNOPSIS
  Installs dmlserve as a Windows service: copies the executables, creates the
  service (virtual account NT SERVICE\dmlserve, delayed auto-start, restart on
  failure, pre-shutdown drain), opens the firewall for gRPC and metrics, grants
  the service account read access to a tensor repository, and starts it.

.EXAMPLE
  # From an elevated PowerShell, in the unpacked dmlserve-<version>-windows-x64.zip:
  .\install-dmlserve.ps1 -Backend d3d12 -TensorRepository D:\models\dmlserve

.EXAMPLE
  # From a build folder (docs/windows.md):
  .\install-dmlserve.ps1 -Source .\build-windows\server\dmlserve.exe

.EXAMPLE
  .\install-dmlserve.ps1 -Uninstall
#>
[CmdletBinding()]
param(
  # dmlserve.exe; dmlserve-cli.exe is copied too when it lies beside it.
  [string]$Source = (Join-Path $PSScriptRoot "dmlserve.exe"),
  [string]$InstallDir = "$env:ProgramFiles\dmlserve",
  [string]$ServiceName = "dmlserve",
  [int]$GrpcPort = 50051,
  [int]$MetricsPort = 9464,
  [ValidateSet("auto", "cpu", "d3d12")][string]$Backend = "auto",
  [string]$TensorRepository = "",
  [string[]]$ExtraFlags = @(),
  [switch]$Uninstall
)
$ErrorActionPreference = "Stop"

$principal = New-Object Security.Principal.WindowsPrincipal(
  [Security.Principal.WindowsIdentity]::GetCurrent())
if (-not $principal.IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)) {
  throw "Run this script from an elevated PowerShell (the Service Control Manager needs it)."
}

$exe = Join-Path $InstallDir "dmlserve.exe"
$ruleName = "dmlserve ($ServiceName)"

if ($Uninstall) {
  # Stops the service (it drains: work in flight finishes), deletes it and
  # its event log source.
  if (Test-Path $exe) { & $exe service uninstall "--service_name=$ServiceName" }
  Get-NetFirewallRule -DisplayName $ruleName -ErrorAction SilentlyContinue | Remove-NetFirewallRule
  Write-Host "dmlserve service $ServiceName removed; $InstallDir left in place."
  return
}

New-Item -ItemType Directory -Force -Path $InstallDir | Out-Null
Copy-Item -Force $Source $exe
$cli = Join-Path (Split-Path -Parent $Source) "dmlserve-cli.exe"
if (Test-Path $cli) { Copy-Item -Force $cli (Join-Path $InstallDir "dmlserve-cli.exe") }

$flags = @(
  "--listen=0.0.0.0:$GrpcPort",
  "--metrics_listen=0.0.0.0:$MetricsPort",
  "--backend=$Backend"
)
if ($TensorRepository) {
  $flags += "--tensor_repository=$TensorRepository"
  # The virtual account reads the weights and nothing else.
  icacls $TensorRepository /grant "NT SERVICE\${ServiceName}:(OI)(CI)RX" | Out-Null
}
$flags += $ExtraFlags

& $exe service install "--service_name=$ServiceName" @flags
if ($LASTEXITCODE -ne 0) { throw "dmlserve service install failed ($LASTEXITCODE)" }

New-NetFirewallRule -DisplayName $ruleName -Direction Inbound -Action Allow -Protocol TCP `
  -LocalPort $GrpcPort, $MetricsPort -Program $exe -Profile Domain, Private | Out-Null

& $exe service start "--service_name=$ServiceName"
if ($LASTEXITCODE -ne 0) {
  throw "dmlserve did not start: see Event Viewer > Windows Logs > Application, source $ServiceName"
}
Get-Service $ServiceName | Format-List Name, Status, StartType
Write-Host "Metrics: http://localhost:$MetricsPort/metrics"
